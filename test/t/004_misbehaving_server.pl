# test/t/004_misbehaving_server.pl
#   A remote "server" that breaks the protocol (test/t/FakePg.pm): every
#   misbehaviour ends the query with a clear error naming the server or the
#   foreign table, within a bounded time, in every fetch mode; the
#   coordinator never crashes, and its session goes on working.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use FakePg;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $fake_log = "$PostgreSQL::Test::Utils::tmp_check/fake_pg.log";
unlink $fake_log;
my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init;
$coord->start;

# The fake server reports the coordinator's major version: streams are
# binary only between servers of one major version.
my ($major) = $coord->safe_psql('postgres', 'SHOW server_version_num') =~ /^(\d+)\d{4}$/;
my $fake = FakePg->new(log => $fake_log, server_version => "$major.4");
my $fake_port = $fake->port;

# One server per scenario (the fake reads it from dbname), and a table per
# fetch mode.  The test runs as the bootstrap superuser: no password.
my $setup = "CREATE EXTENSION async_fdw;\n";
for my $s (FakePg::scenarios())
{
	$setup .= qq{
		CREATE SERVER s_$s FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '127.0.0.1', port '$fake_port', dbname '$s');
		CREATE USER MAPPING FOR CURRENT_USER SERVER s_$s;
	};
	for my $mode (qw(stream cursor auto))
	{
		$setup .= "CREATE FOREIGN TABLE ${s}_$mode (id int, v text) SERVER s_$s"
		  . " OPTIONS (table_name 't', fetch_mode '$mode');\n";
	}
}
$coord->safe_psql('postgres', $setup);

my $rows = "1|one\n2|two\n3|three";

# The fake is right when it means to be: every mode reads its rows, and
# the second stream of a table is in binary format.
is($coord->safe_psql('postgres', 'SELECT * FROM good_stream'), $rows, 'good server: text stream');
is($coord->safe_psql('postgres', 'SELECT * FROM good_stream; SELECT * FROM good_stream'),
	"$rows\n$rows", 'good server: binary stream');
is($coord->safe_psql('postgres', 'SELECT * FROM good_cursor'), $rows, 'good server: cursor');
is($coord->safe_psql('postgres', 'SELECT * FROM good_auto'), $rows, 'good server: auto');
is($coord->safe_psql('postgres', 'SELECT * FROM good_auto LIMIT 2'), "1|one\n2|two",
	'good server: auto with a LIMIT');
like(slurp_file($fake_log), qr/COPY \(SELECT c1::pg_catalog\.int4, c2::pg_catalog\.text .*\(FORMAT binary\)/,
	'good server: a binary stream was asked for');

# The queries a session of scenario S received, in order.
sub fake_queries
{
	my ($s) = @_;
	my (%pids, @queries);
	for my $line (split /\n/, slurp_file($fake_log))
	{
		my ($pid, $what) = $line =~ /^\S+ \[(\d+)\] (.*)$/ or next;
		$pids{$pid} = 1 if $what eq "startup of $s";
		push @queries, $what if $pids{$pid} && $what =~ /query: /;
	}
	return @queries;
}

# run_case(NAME, QUERY, SQLSTATE, MESSAGE, %opts): QUERY fails with
# SQLSTATE and a message matching MESSAGE (checked against the whole error
# report, context included), within a bounded time; then the session and the
# coordinator go on working.  opts: before (SQL run first in the same
# session, whose output must be before_out), timeout (seconds, by default
# 25: less than the 30 s that the cleanup after an error may wait for a
# remote server, so that a cleanup waiting for an answer that never comes
# shows).
sub run_case
{
	my ($name, $query, $sqlstate, $message, %opts) = @_;
	my ($stdout, $stderr, $timed_out);
	my $before = $opts{before} // '';
	my $sql = "\\set VERBOSITY verbose\nSET statement_timeout = '3s';\n"
	  . "$before\n$query;\nSELECT 'alive';\nSELECT * FROM good_stream;\n";

	$coord->psql('postgres', $sql,
		stdout => \$stdout, stderr => \$stderr,
		on_error_stop => 0,
		timeout => $opts{timeout} // 25,
		timed_out => \$timed_out);
	note "stderr of $name:\n$stderr";
	ok(!$timed_out, "$name: the query ends");
	like($stderr, qr/ERROR:  $sqlstate: /, "$name: SQLSTATE $sqlstate");
	like($stderr, $message, "$name: the error says what happened where");
	is((() = $stderr =~ /ERROR:/g), 1, "$name: one error");
	like($stdout, qr/^\Q$opts{before_out}\E\n/, "$name: the query before it worked")
	  if defined $opts{before_out};
	like($stdout, qr/alive\n\Q$rows\E$/, "$name: the session goes on, and reads another server");
	is($coord->safe_psql('postgres', 'SELECT 1'), '1', "$name: the coordinator is up");
	return;
}

# A server that broke the protocol, or sent what libpq could not read, is
# not trusted with one more command (an ABORT would wait for its answer):
# its connection is dropped.
sub no_command_after
{
	my ($s) = @_;
	my @abort = grep { /ABORT|ROLLBACK/ } fake_queries($s);
	is(scalar @abort, 0, "$s: no command after the misbehaviour");
	return;
}

# CopyInResponse or CopyBothResponse where a COPY TO or FETCH was sent.
for my $s (qw(copy_in copy_both))
{
	for my $t ("${s}_stream", "${s}_cursor", "${s}_auto", "${s}_auto LIMIT 2")
	{
		run_case("$s, $t", "SELECT * FROM $t", '08P01',
			qr/protocol violation by server "s_$s".*\n.*DETAIL:  .*Copy(In|Both)Response.*\n(.*\n)*.*scan of foreign table "${s}_/);
	}
	no_command_after($s);
}

# A COPY where a FETCH was sent: its rows are not taken for the cursor's.
for my $t ('copy_out_fetch_cursor', 'copy_out_fetch_auto LIMIT 2')
{
	run_case("copy_out_fetch, $t", "SELECT * FROM $t", '08P01',
		qr/protocol violation by server "s_copy_out_fetch".*\n.*DETAIL:  .*CopyOutResponse/);
}

# The same in ANALYZE, which reads through a cursor of its own.
run_case('copy_out_fetch, ANALYZE', 'ANALYZE copy_out_fetch_cursor', '08P01',
	qr/protocol violation by server "s_copy_out_fetch".*\n.*DETAIL:  .*CopyOutResponse.*\n.*CONTEXT:  remote SQL command: FETCH 100 FROM c1/);
no_command_after('copy_out_fetch');

# Binary rows that cannot be read: the first stream of the table is text
# (and right), the second binary.
my %binary = (
	bin_overflow    => [ '22P03', qr/incorrect binary data format in a remote row of foreign table "bin_overflow_stream"/ ],
	bin_truncated   => [ '22P03', qr/incorrect binary data format in a remote row of foreign table "bin_truncated_stream"/ ],
	bin_wrong_count => [ 'HV004', qr/remote query of foreign table "bin_wrong_count_stream" returned 3 columns, expected 2/ ],
	bin_bad_header  => [ '22P03', qr/remote COPY of foreign table "bin_bad_header_stream" did not start with a binary COPY header/ ],
);
for my $s (sort keys %binary)
{
	run_case("$s, binary stream", "SELECT * FROM ${s}_stream", @{ $binary{$s} },
		before => "SELECT * FROM ${s}_stream;", before_out => $rows);
	ok((grep { /FORMAT binary/ } fake_queries($s)), "$s: the failing stream was binary");
}

# Rows where a COPY was sent, text or binary: they are not taken for the
# stream's (a binary stream would read lines it never received).
run_case('text_rows, text stream', 'SELECT * FROM text_rows_stream', '08P01',
	qr/protocol violation by server "s_text_rows".*\n.*DETAIL:  It answered a COPY with rows/);
run_case('bin_rows, binary stream', 'SELECT * FROM bin_rows_stream', '08P01',
	qr/protocol violation by server "s_bin_rows".*\n.*DETAIL:  It answered a COPY with rows/,
	before => 'SELECT * FROM bin_rows_stream;', before_out => $rows);
no_command_after($_) for qw(text_rows bin_rows);

# Binary trailers without end: statement_timeout ends the query.
run_case('bin_endless_trailer, binary stream', 'SELECT * FROM bin_endless_trailer_stream', '57014',
	qr/canceling statement due to statement timeout\n(.*\n)*.*scan of foreign table "bin_endless_trailer_stream"/,
	before => 'SELECT * FROM bin_endless_trailer_stream;', before_out => $rows);

run_case('text_wrong_count, text stream', 'SELECT * FROM text_wrong_count_stream', 'HV004',
	qr/remote query of foreign table "text_wrong_count_stream" returned 3 columns, expected 2/);

# A CopyData message announcing 1 GB that never comes: statement_timeout.
run_case('huge_message, stream', 'SELECT * FROM huge_message_stream', '57014',
	qr/canceling statement due to statement timeout\n(.*\n)*.*scan of foreign table "huge_message_stream"/);

# A CopyData message whose length libpq refuses (libpq 18 says it cannot
# make room for it; older ones that they lost synchronization).
run_case('oversized_message, stream', 'SELECT * FROM oversized_message_stream', '08006',
	qr/lost connection to server "s_oversized_message".*\n.*DETAIL:  .*(\n.*lost synchronization with server|cannot allocate memory for input buffer)/);

# The connection cut in the middle of a row.
for my $t (qw(cut_mid_row_stream cut_mid_row_cursor))
{
	run_case("cut_mid_row, $t", "SELECT * FROM $t", '08006',
		qr/lost connection to server "s_cut_mid_row".*\n.*DETAIL:  server closed the connection unexpectedly/);
}

# A query run whole (a lookup with its LIMIT) answered without rows.
run_case('select_no_rows, auto LIMIT 2', 'SELECT * FROM select_no_rows_auto LIMIT 2', '08P01',
	qr/protocol violation by server "s_select_no_rows".*\n.*DETAIL:  It answered a query with no rows and no error/);
no_command_after('select_no_rows');

run_case('short_datarow, cursor', 'SELECT * FROM short_datarow_cursor', '08006',
	qr/lost connection to server "s_short_datarow".*\n.*DETAIL:  unexpected field count in "D" message/);

# A message type the protocol does not have; an error without a SQLSTATE.
for my $t (qw(garbage_stream garbage_cursor))
{
	run_case("garbage, $t", "SELECT * FROM $t", '08006',
		qr/lost connection to server "s_garbage".*\n.*DETAIL:  unexpected response from server; first received character was "!"/);
}
run_case('garbage_mid_copy, stream', 'SELECT * FROM garbage_mid_copy_stream', '08006',
	qr/lost connection to server "s_garbage_mid_copy".*\n.*DETAIL:  unexpected response from server; first received character was "!"/);
for my $t (qw(error_no_sqlstate_stream error_no_sqlstate_cursor))
{
	run_case("error_no_sqlstate, $t", "SELECT * FROM $t", '08006',
		qr/lost connection to server "s_error_no_sqlstate".*\n.*DETAIL:  something went wrong, and no code says what/);
}
no_command_after($_) for qw(short_datarow garbage garbage_mid_copy error_no_sqlstate);

# Endless notices, and no answer at all: statement_timeout ends the query.
for my $s (qw(notice_flood silent))
{
	for my $t ("${s}_stream", "${s}_cursor")
	{
		run_case("$s, $t", "SELECT * FROM $t", '57014',
			qr/canceling statement due to statement timeout\n(.*\n)*.*scan of foreign table "$t"/);
	}
}

# No answer, not even to the cancel and the ABORT: the cleanup gives up
# after its own timeout (30 s) and drops the connection.
run_case('deaf, stream', 'SELECT * FROM deaf_stream', '57014',
	qr/canceling statement due to statement timeout/, timeout => 120);

# The connection closed at once, after or during the startup.
run_case('close_after_startup, stream', 'SELECT * FROM close_after_startup_stream', '08006',
	qr/lost connection to server "s_close_after_startup".*\n.*DETAIL:  server closed the connection unexpectedly/);
run_case('close_at_startup, stream', 'SELECT * FROM close_at_startup_stream', '08001',
	qr/could not connect to server "s_close_at_startup"/);

# use_remote_estimate: the fake's estimate is taken; one without an
# estimate is a clear error at planning.
$coord->safe_psql('postgres', q{
	ALTER FOREIGN TABLE good_cursor OPTIONS (ADD use_remote_estimate 'true');
	ALTER FOREIGN TABLE explain_garbage_cursor OPTIONS (ADD use_remote_estimate 'true');
});
like($coord->safe_psql('postgres', 'EXPLAIN SELECT * FROM good_cursor'),
	qr/rows=2550 /, 'use_remote_estimate: the remote rows');
run_case('explain_garbage, cursor', 'SELECT * FROM explain_garbage_cursor', 'HV004',
	qr/could not read the remote server's estimate for foreign table "explain_garbage_cursor"/);

# No backend died, and no assertion failed.
my $log = slurp_file($coord->logfile);
unlike($log, qr/terminated by signal|TRAP:/, 'no backend crashed');

$fake->stop;
$coord->stop;
done_testing();
