# test/t/FakePg.pm
#   A fake PostgreSQL server for the TAP tests: it speaks just enough of the
#   frontend/backend protocol (version 3.0) for libpq to connect and for
#   async_fdw's commands to be answered, and then misbehaves on purpose.
#
# Each session follows the "scenario" named by the database it asks for
# (the foreign server's dbname).  Transaction commands, the snapshot export
# and async_fdw's check of the remote types get well-formed answers; what a
# scenario changes is the answer to the COPY (a stream) or the FETCH (a
# cursor), or the session's startup.  A cancel request arrives on a new
# connection and is passed to the session it names, which reacts as its
# scenario says (a real server's "canceling statement" error, hanging up,
# or nothing).
#
# Every session process ends when its client goes away or after a fixed
# lifetime; the listener ends when stop() is called, when the test that
# started it is gone, or after a fixed lifetime too.  Only loopback
# addresses are used.

package FakePg;

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes ();

# Seconds a listener or a session lives at most, whatever happens.
my $LIFETIME = 900;

# The remote table every scenario serves: (id int4, v text).
my @ROWS = ([ 1, 'one' ], [ 2, 'two' ], [ 3, 'three' ]);

my $INT4OID = 23;
my $TEXTOID = 25;
my $BOOLOID = 16;

my $BINARY_SIGNATURE = "PGCOPY\n\377\r\n\0";

# The scenarios, by name.  Keys: data (the answer to a COPY or a FETCH),
# copy (to a COPY only), binary and text (to a COPY in that format), fetch
# (to a FETCH only), select (to a query run whole), startup (the startup's
# end), explain (to an EXPLAIN), savepoint (to a SAVEPOINT of a local
# nesting level, sN; with it, a ROLLBACK TO or RELEASE of a savepoint not
# taken fails as on a real server), and cancel: what a session does when a
# cancel request names it, 'error' answering the statement with "canceling
# statement" as a real server does, 'close' (the default) hanging up,
# 'ignore' carrying on.
my %scenarios = (
	# Everything well-formed.
	good => {},

	# CopyInResponse where a COPY TO or a FETCH was sent.
	copy_in => { data => 'copy_in' },

	# CopyBothResponse where a COPY TO or a FETCH was sent.
	copy_both => { data => 'copy_both' },

	# CopyOutResponse and rows in COPY text format for a FETCH.
	copy_out_fetch => { fetch => 'copy_out' },

	# Binary COPY rows that cannot be read; text streams are fine.
	bin_overflow    => { binary => 'field_overflow' },
	bin_truncated   => { binary => 'truncated' },
	bin_wrong_count => { binary => 'wrong_count' },
	bin_bad_header  => { binary => 'bad_header' },

	# Binary COPY trailers, one after the other, never the end; a cancel
	# hangs up.
	bin_endless_trailer => { binary => 'endless_trailer', cancel => 'close' },

	# A text COPY row with three fields for two columns.
	text_wrong_count => { text => 'wrong_count' },

	# Rows (RowDescription, DataRow) where a COPY was sent: to a text
	# COPY, or to a binary one only (the text stream before it is right).
	text_rows => { text => 'rows' },
	bin_rows => { binary => 'rows' },

	# A CopyData message that claims 1 GB, then nothing more.
	huge_message => { copy => 'huge', cancel => 'close' },

	# A CopyData message whose length libpq cannot accept at all.
	oversized_message => { copy => 'oversized' },

	# The connection closed in the middle of a CopyData or DataRow.
	cut_mid_row => { data => 'cut_mid_row' },

	# A DataRow with fewer columns than its RowDescription.
	short_datarow => { fetch => 'short_datarow' },

	# A query run whole (SELECT) answered by CommandComplete alone, without
	# its RowDescription.
	select_no_rows => { select => 'no_rows' },

	# A message of a type the protocol does not have, as the answer or
	# after the first row of a COPY.
	garbage => { data => 'garbage' },
	garbage_mid_copy => { copy => 'garbage_mid' },

	# An ErrorResponse without a SQLSTATE.
	error_no_sqlstate => { data => 'error_no_sqlstate' },

	# NoticeResponse after NoticeResponse, never the end; a cancel hangs
	# up.
	notice_flood => { data => 'notice_flood', cancel => 'close' },

	# No answer to the query, but a cancel works as on a real server.
	silent => { data => 'hang', cancel => 'error' },

	# No answer to the query, and none to a cancel or to anything else.
	deaf => { data => 'hang', cancel => 'ignore' },

	# The connection closed at once after the startup completed.
	close_after_startup => { startup => 'close_after' },

	# The connection closed on receipt of the startup packet.
	close_at_startup => { startup => 'close_at' },

	# An EXPLAIN (use_remote_estimate) whose plan has no estimate.
	explain_garbage => { explain => 'garbage' },

	# SAVEPOINT sN answered after 2 s, what came before it in the same
	# query answered at once; a cancel meanwhile fails it as on a real
	# server, and the savepoint is not taken.
	slow_savepoint => { savepoint => 'slow', cancel => 'error' },
);

# FakePg->new(log => FILE [, server_version => 'M.m']): start a listener on a
# free loopback port; its sessions report SERVER_VERSION (default 15.4).
sub new
{
	my ($class, %params) = @_;
	my $listen = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Proto     => 'tcp',
		Listen    => 64,
		ReuseAddr => 1) or die "fake server: cannot listen: $!";
	my $self = bless {
		port => $listen->sockport,
		log  => $params{log},
		server_version => $params{server_version} // '15.4',
		test_pid => $$,
	}, $class;

	my $pid = fork;
	die "fake server: cannot fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		eval { $self->serve($listen); };
		$self->note("listener died: $@") if $@;
		POSIX::_exit(0);
	}
	close $listen;
	$self->{pid} = $pid;
	return $self;
}

# The port the fake server listens on.
sub port { return $_[0]->{port}; }

# The scenario names.
sub scenarios { return sort keys %scenarios; }

# Stop the listener (sessions end when their clients go).
sub stop
{
	my ($self) = @_;
	return unless $self->{pid} && $$ == $self->{test_pid};
	kill 'TERM', $self->{pid};
	waitpid($self->{pid}, 0);
	delete $self->{pid};
}

sub DESTROY { $_[0]->stop; }

# Append a line to the log file, if any.
sub note
{
	my ($self, $line) = @_;
	return unless $self->{log};
	open(my $fh, '>>', $self->{log}) or return;
	printf $fh "%.3f [%d] %s\n", Time::HiRes::time(), $$, $line;
	close $fh;
}

# Accept connections, one process each, until told to stop.
sub serve
{
	my ($self, $listen) = @_;
	my $start = time;
	my $sel   = IO::Select->new($listen);

	$SIG{CHLD} = 'IGNORE';
	$SIG{TERM} = sub { POSIX::_exit(0); };
	while (time - $start < $LIFETIME && getppid() == $self->{test_pid})
	{
		next unless $sel->can_read(1);
		my $sock = $listen->accept or next;
		my $pid = fork;
		if (!defined $pid)
		{
			close $sock;
			next;
		}
		if ($pid == 0)
		{
			close $listen;
			$SIG{TERM} = 'DEFAULT';
			eval { FakePg::Session->new($self, $sock)->run; };
			$self->note("session died: $@") if $@;
			POSIX::_exit(0);
		}
		close $sock;
	}
}

# Message builders: type byte, length, payload.
sub msg { my ($type, $payload) = @_; return $type . pack('N', length($payload) + 4) . $payload; }

sub fields_msg
{
	my ($type, %f) = @_;
	my $payload = '';
	for my $k (qw(S V C M D H))
	{
		$payload .= $k . $f{$k} . "\0" if defined $f{$k};
	}
	return msg($type, $payload . "\0");
}

sub error_msg
{
	my ($code, $text) = @_;
	return fields_msg('E', S => 'ERROR', V => 'ERROR', C => $code, M => $text);
}

sub command_complete { return msg('C', "$_[0]\0"); }

sub row_description
{
	my @cols = @_;
	my $payload = pack('n', scalar @cols);
	for my $c (@cols)
	{
		my ($name, $type) = @$c;
		my $len = $type == $TEXTOID ? -1 : $type == $BOOLOID ? 1 : 4;
		$payload .= "$name\0" . pack('NnNnNn', 0, 0, $type, $len & 0xffff, 0xffffffff, 0);
	}
	return msg('T', $payload);
}

sub data_row
{
	my @values = @_;
	my $payload = pack('n', scalar @values);
	for my $v (@values)
	{
		$payload .= defined $v ? pack('N', length $v) . $v : pack('N', 0xffffffff);
	}
	return msg('D', $payload);
}

sub copy_response
{
	my ($type, $format, $ncols) = @_;
	return msg($type, pack('Cn', $format, $ncols) . pack('n', $format) x $ncols);
}

sub binary_row
{
	my ($id, $v) = @_;
	return pack('n', 2) . pack('N', 4) . pack('N', $id) . pack('N', length $v) . $v;
}

package FakePg::Session;

use strict;
use warnings;

use IO::Select;
use Time::HiRes ();

# A session: one client connection, or one cancel request.
sub new
{
	my ($class, $server, $sock) = @_;
	binmode $sock;
	return bless {
		server   => $server,
		sock     => $sock,
		sel      => IO::Select->new($sock),
		inbuf    => '',
		status   => 'I',
		start    => time,
		cancelled => 0,
	}, $class;
}

sub note { my $self = shift; $self->{server}->note(@_); }

# Read N bytes; undef when the client went away or the session is over.
# Returns early, with undef, when a cancel arrived and ON_CANCEL is set.
sub read_bytes
{
	my ($self, $n, $on_cancel) = @_;
	while (length($self->{inbuf}) < $n)
	{
		return undef if time - $self->{start} > $LIFETIME;
		return undef if $on_cancel && $self->{cancelled};
		next unless $self->{sel}->can_read(0.1);
		my $got = sysread($self->{sock}, my $chunk, 65536);
		return undef unless $got;
		$self->{inbuf} .= $chunk;
	}
	return substr($self->{inbuf}, 0, $n, '');
}

# Send bytes; false when the client went away.
sub send_bytes
{
	my ($self, $bytes) = @_;
	while (length $bytes)
	{
		my $n = syswrite($self->{sock}, $bytes);
		return 0 unless defined $n && $n > 0;
		substr($bytes, 0, $n, '');
	}
	return 1;
}

sub hang_up { my ($self) = @_; close $self->{sock}; POSIX::_exit(0); }

sub run
{
	my ($self) = @_;
	$SIG{PIPE} = 'IGNORE';
	$SIG{USR1} = sub { $self->{cancelled} = 1; };

	# The startup packet, after refusing SSL and GSS encryption.
	my ($len, $code, $body);
	for (;;)
	{
		my $head = $self->read_bytes(8) // return;
		($len, $code) = unpack('NN', $head);
		return if $len < 8 || $len > 10000;
		$body = $self->read_bytes($len - 8) // return;
		if ($code == 80877103 || $code == 80877104)
		{
			$self->send_bytes('N') or return;
			next;
		}
		last;
	}
	if ($code == 80877102)
	{
		# A cancel request: pass it to the session it names.
		my ($pid, $key) = unpack('NN', $body);
		$self->note("cancel request for $pid");
		kill 'USR1', $pid if $key == ($pid ^ 0x5a5a5a5a);
		return;
	}
	return unless $code == 196608;

	my %params = split(/\0/, $body);
	my $scenario = $params{database} // '';
	$self->{scenario} = $scenario;
	$self->{spec} = $scenarios{$scenario} // {};
	$self->note("startup of $scenario");
	$self->hang_up if ($self->{spec}{startup} // '') eq 'close_at';

	my $encoding = $params{client_encoding} // 'UTF8';
	my $reply = FakePg::msg('R', pack('N', 0));
	my %ps = (
		server_version => $self->{server}{server_version},
		server_encoding => $encoding,
		client_encoding => $encoding,
		DateStyle => 'ISO, MDY',
		IntervalStyle => 'postgres',
		TimeZone => 'UTC',
		integer_datetimes => 'on',
		standard_conforming_strings => 'on',
		application_name => $params{application_name} // '',
		is_superuser => 'on',
		session_authorization => $params{user} // 'fake');
	$reply .= FakePg::msg('S', "$_\0$ps{$_}\0") for sort keys %ps;
	$reply .= FakePg::msg('K', pack('NN', $$, $$ ^ 0x5a5a5a5a));
	$reply .= FakePg::msg('Z', 'I');
	$self->send_bytes($reply) or return;
	$self->hang_up if ($self->{spec}{startup} // '') eq 'close_after';

	# Messages until Terminate.
	for (;;)
	{
		my $head = $self->read_bytes(5) // return;
		my ($type, $mlen) = unpack('aN', $head);
		my $payload = $self->read_bytes($mlen - 4) // return;
		if ($type eq 'X')
		{
			$self->note('terminate');
			return;
		}
		if ($type eq 'Q')
		{
			$payload =~ s/\0\z//;
			$self->note("query: $payload");
			$self->{cancelled} = 0;
			$self->query($payload) or return;
		}
		elsif ($type eq 'S')
		{
			# The extended protocol is not spoken here.
			$self->send_bytes(FakePg::error_msg('0A000', 'the fake server does not support the extended query protocol')
				  . FakePg::msg('Z', $self->{status} eq 'I' ? 'I' : 'E')) or return;
		}
		# Other messages (Parse, Bind, a late CopyData...) are ignored.
	}
}

# Split a simple query into its statements, at semicolons outside quotes
# and parentheses.
sub split_statements
{
	my ($sql) = @_;
	my @out;
	my ($cur, $depth, $quote) = ('', 0, '');
	for my $c (split //, $sql)
	{
		if ($quote)
		{
			$quote = '' if $c eq $quote;
		}
		elsif ($c eq "'" || $c eq '"') { $quote = $c; }
		elsif ($c eq '(') { $depth++; }
		elsif ($c eq ')') { $depth--; }
		elsif ($c eq ';' && $depth == 0)
		{
			push @out, $cur;
			$cur = '';
			next;
		}
		$cur .= $c;
	}
	push @out, $cur;
	return grep { /\S/ } map { s/^\s+|\s+$//gr } @out;
}

# Answer one simple query; false when the session must end.
sub query
{
	my ($self, $sql) = @_;
	my $out = '';
	my $failed = 0;

	for my $stmt (split_statements($sql))
	{
		if ($self->{status} eq 'E' && $stmt !~ /^(ROLLBACK|ABORT)/i)
		{
			$out .= FakePg::error_msg('25P02', 'current transaction is aborted, commands ignored until end of transaction block');
			$failed = 1;
			last;
		}
		my $r = $self->statement($stmt, \$out);
		return 0 if $r eq 'gone';
		return 1 if $r eq 'answered';
		if ($r eq 'error')
		{
			$failed = 1;
			last;
		}
	}
	$self->{status} = 'E' if $failed && $self->{status} ne 'I';
	return $self->send_bytes($out . FakePg::msg('Z', $self->{status}));
}

# Answer one statement into $$out: 'ok', 'error' (the rest is skipped),
# 'answered' (the scenario sent everything itself, ReadyForQuery too) or
# 'gone'.
sub statement
{
	my ($self, $stmt, $out) = @_;
	my $spec = $self->{spec};

	if ($stmt =~ /^START TRANSACTION/i || $stmt =~ /^BEGIN/i)
	{
		$self->{status} = 'T';
		$self->{savepoints} = [];
		$$out .= FakePg::command_complete('START TRANSACTION');
	}
	elsif ($stmt =~ /^(ROLLBACK TO|RELEASE)\s+(?:SAVEPOINT\s+)?(\w+)/i)
	{
		my ($what, $name) = (uc $1, $2);
		my @taken = @{ $self->{savepoints} // [] };
		my ($at) = grep { $taken[$_] eq $name } reverse 0 .. $#taken;
		if (!defined $at && $spec->{savepoint})
		{
			$$out .= FakePg::error_msg('3B001', qq{savepoint "$name" does not exist});
			return 'error';
		}
		if (defined $at)
		{
			# A rollback keeps the savepoint; a release ends it.
			splice(@taken, $what eq 'RELEASE' ? $at : $at + 1);
			$self->{savepoints} = \@taken;
		}
		if ($what eq 'RELEASE')
		{
			$$out .= FakePg::command_complete('RELEASE');
		}
		else
		{
			$self->{status} = 'T';
			$$out .= FakePg::command_complete('ROLLBACK');
		}
	}
	elsif ($stmt =~ /^(ABORT|ROLLBACK)/i)
	{
		$self->{status} = 'I';
		$self->{savepoints} = [];
		$$out .= FakePg::command_complete('ROLLBACK');
	}
	elsif ($stmt =~ /^COMMIT/i)
	{
		$self->{status} = 'I';
		$self->{savepoints} = [];
		$$out .= FakePg::command_complete('COMMIT');
	}
	elsif ($stmt =~ /^SAVEPOINT\s+(\w+)/i)
	{
		my $name = $1;
		if (($spec->{savepoint} // '') eq 'slow' && $name =~ /^s\d+$/)
		{
			# What came before is answered now; this one waits.
			$self->send_bytes($$out) or return 'gone';
			$$out = '';
			$self->note("holding SAVEPOINT $name");
			my $until = Time::HiRes::time() + 2;
			Time::HiRes::sleep(0.01)
			  while !$self->{cancelled} && Time::HiRes::time() < $until;
			if ($self->{cancelled})
			{
				$self->{cancelled} = 0;
				$self->note("cancel: SAVEPOINT $name not taken");
				$$out .= FakePg::error_msg('57014', 'canceling statement due to user request');
				return 'error';
			}
		}
		push @{ $self->{savepoints} }, $name;
		$$out .= FakePg::command_complete('SAVEPOINT');
	}
	elsif ($stmt =~ /^(SET|CLOSE|DEALLOCATE)\b/i)
	{
		my %tags = (SET => 'SET', CLOSE => 'CLOSE CURSOR', DEALLOCATE => 'DEALLOCATE');
		$$out .= FakePg::command_complete($tags{ uc $1 });
	}
	elsif ($stmt =~ /pg_export_snapshot/)
	{
		$$out .= FakePg::row_description([ 'pg_export_snapshot', $TEXTOID ])
		  . FakePg::data_row('00000003-0000001B-1') . FakePg::command_complete('SELECT 1');
	}
	elsif ($stmt =~ /pg_catalog\.pg_attribute/)
	{
		# async_fdw's check of the remote types: they are the local ones.
		$$out .= FakePg::row_description([ '?column?', $BOOLOID ])
		  . FakePg::data_row('t') . FakePg::command_complete('SELECT 1');
	}
	elsif ($stmt =~ /^EXPLAIN/i)
	{
		# A plan's first line, with or without its estimate.
		my $line = ($spec->{explain} // 'good') eq 'garbage'
		  ? 'Seq Scan on t  (no estimate here)'
		  : 'Seq Scan on t  (cost=0.00..35.50 rows=2550 width=36)';
		$$out .= FakePg::row_description([ 'QUERY PLAN', $TEXTOID ])
		  . FakePg::data_row($line) . FakePg::command_complete('EXPLAIN');
	}
	elsif ($stmt =~ /^DECLARE\s+(\w+)/i)
	{
		# A cursor's rows, as a server gives them: no more than its
		# query's LIMIT.
		my $cursor = $1;
		delete $self->{fetched}{$cursor};
		$self->{limit}{$cursor} = $stmt =~ /\bLIMIT\s+(\d+)/i ? $1 : undef;
		$$out .= FakePg::command_complete('DECLARE CURSOR');
	}
	elsif ($stmt =~ /^COPY/i)
	{
		my $binary = $stmt =~ /FORMAT binary\)\s*$/i;
		my $how = $spec->{data} // $spec->{copy}
		  // ($binary ? $spec->{binary} : $spec->{text}) // 'good';
		return $self->copy($how, $binary, $out);
	}
	elsif ($stmt =~ /^FETCH\s+(\d+)\s+FROM\s+(\w+)/i)
	{
		my ($n, $cursor) = ($1, $2);
		my $how = $spec->{data} // $spec->{fetch} // 'good';
		return $self->fetch($how, $cursor, $out);
	}
	elsif ($stmt =~ /^SELECT\b.*\bFROM public\.t\b/i)
	{
		# A query run whole (a lookup bounded by its LIMIT): answered as
		# the first FETCH of a cursor over it.
		if (($spec->{select} // '') eq 'no_rows')
		{
			$$out .= FakePg::command_complete('SELECT 0');
			return 'ok';
		}
		delete $self->{fetched}{''};
		$self->{limit}{''} = $stmt =~ /\bLIMIT\s+(\d+)/i ? $1 : undef;
		my $how = $spec->{data} // $spec->{fetch} // 'good';
		return $self->fetch($how, '', $out);
	}
	else
	{
		my ($word) = $stmt =~ /^(\w+)/;
		$$out .= FakePg::command_complete(uc($word // 'EMPTY'));
	}
	return 'ok';
}

# Misbehaviours shared by COPY and FETCH.  Returns undef when HOW is not
# one of them.
sub common_misbehaviour
{
	my ($self, $how, $out) = @_;

	if ($how eq 'copy_in' || $how eq 'copy_both')
	{
		# Then wait for the client: CopyFail gets the error a real
		# server gives; CopyData and CopyDone are read and dropped.
		$self->send_bytes($$out . FakePg::copy_response($how eq 'copy_in' ? 'G' : 'W', 0, 2)) or return 'gone';
		$$out = '';
		for (;;)
		{
			my $head = $self->read_bytes(5) // return 'gone';
			my ($type, $mlen) = unpack('aN', $head);
			my $payload = $self->read_bytes($mlen - 4) // return 'gone';
			$self->note("in COPY FROM: message $type");
			if ($type eq 'f' || $type eq 'c')
			{
				$self->{status} = 'E' if $self->{status} ne 'I';
				$self->send_bytes(FakePg::error_msg('57014', 'COPY from stdin failed')
					  . FakePg::msg('Z', $self->{status})) or return 'gone';
				return 'answered';
			}
			return 'gone' if $type eq 'X';
		}
	}
	if ($how eq 'garbage')
	{
		$self->send_bytes($$out . FakePg::msg('!', 'what is this')) or return 'gone';
		return $self->idle_until_gone;
	}
	if ($how eq 'error_no_sqlstate')
	{
		$$out .= FakePg::fields_msg('E', S => 'ERROR', M => 'something went wrong, and no code says what');
		return 'error';
	}
	if ($how eq 'notice_flood')
	{
		$self->send_bytes($$out) or return 'gone';
		my $notice = FakePg::fields_msg('N', S => 'NOTICE', V => 'NOTICE', C => '00000', M => 'still working');
		my $batch = $notice x 100;
		for (;;)
		{
			return $self->cancelled_answer if $self->{cancelled};
			return 'gone' if time - $self->{start} > $LIFETIME;
			$self->send_bytes($batch) or return 'gone';
		}
	}
	if ($how eq 'hang')
	{
		$self->send_bytes($$out) or return 'gone';
		$$out = '';
		for (;;)
		{
			# Whatever the client sends is read and ignored.
			my $r = $self->read_bytes(1, 1);
			if (!defined $r)
			{
				return 'gone' unless $self->{cancelled};
				my $a = $self->cancelled_answer;
				return $a unless $a eq 'ignored';
			}
		}
	}
	return undef;
}

# What a session in a hang or a flood does on a cancel request: 'gone'
# (it hung up), 'answered' (it sent a real server's error) or 'ignored'.
sub cancelled_answer
{
	my ($self) = @_;
	my $how = $self->{spec}{cancel} // 'close';
	$self->{cancelled} = 0;
	$self->note("cancel: $how");
	$self->hang_up if $how eq 'close';
	return 'ignored' if $how eq 'ignore';
	$self->{status} = 'E' if $self->{status} ne 'I';
	$self->send_bytes(FakePg::error_msg('57014', 'canceling statement due to user request')
		  . FakePg::msg('Z', $self->{status})) or return 'gone';
	return 'answered';
}

# Read and ignore the messages that come until the client goes away.
sub idle_until_gone
{
	my ($self) = @_;
	for (;;)
	{
		my $head = $self->read_bytes(5) // return 'gone';
		my ($type, $mlen) = unpack('aN', $head);
		my $payload = $self->read_bytes($mlen - 4) // return 'gone';
		$payload =~ s/\0\z//;
		$self->note($type eq 'Q' ? "ignored query: $payload" : "ignored message $type");
	}
}

# Answer a COPY (...) TO STDOUT.
sub copy
{
	my ($self, $how, $binary, $out) = @_;
	my $common = $self->common_misbehaviour($how, $out);
	return $common if defined $common;

	if ($how eq 'rows')
	{
		$$out .= FakePg::row_description([ 'id', $INT4OID ], [ 'v', $TEXTOID ]);
		$$out .= FakePg::data_row(@$_) for @ROWS;
		$$out .= FakePg::command_complete('SELECT ' . scalar @ROWS);
		return 'ok';
	}

	my $fmt = $binary ? 1 : 0;
	$$out .= FakePg::copy_response('H', $fmt, 2);
	my @data;
	if ($binary)
	{
		my $header = $BINARY_SIGNATURE . pack('NN', 0, 0);
		$header = "PGCOPY\n\377\r\n\1" . pack('NN', 0, 0) if $how eq 'bad_header';
		push @data, $header . FakePg::binary_row(@{ $ROWS[0] });
		push @data, FakePg::binary_row(@{ $ROWS[1] });
		if ($how eq 'field_overflow')
		{
			# The second field claims 1000 bytes; the message has 5.
			push @data, pack('n', 2) . pack('N', 4) . pack('N', 3) . pack('N', 1000) . 'three';
		}
		elsif ($how eq 'truncated')
		{
			# Two fields announced, the message ends after the first.
			push @data, pack('n', 2) . pack('N', 4) . pack('N', 3);
		}
		elsif ($how eq 'wrong_count')
		{
			push @data, pack('n', 3) . pack('N', 4) . pack('N', 3) . pack('N', 5) . 'three' . pack('N', 1) . 'x';
		}
		else
		{
			push @data, FakePg::binary_row(@{ $ROWS[2] });
		}
		push @data, pack('n', 0xffff);
	}
	else
	{
		push @data, "$_->[0]\t$_->[1]\n" for @ROWS[ 0 .. 1 ];
		push @data, $how eq 'wrong_count' ? "3\tthree\textra\n" : "3\tthree\n";
	}

	if ($how eq 'endless_trailer')
	{
		$self->send_bytes($$out . FakePg::msg('d', $data[0])) or return 'gone';
		$$out = '';
		my $batch = FakePg::msg('d', pack('n', 0xffff)) x 1000;
		for (;;)
		{
			return $self->cancelled_answer if $self->{cancelled};
			return 'gone' if time - $self->{start} > $LIFETIME;
			$self->send_bytes($batch) or return 'gone';
		}
	}
	if ($how eq 'garbage_mid')
	{
		$self->send_bytes($$out . FakePg::msg('d', $data[0]) . FakePg::msg('!', 'what is this')) or return 'gone';
		return $self->idle_until_gone;
	}
	if ($how eq 'huge' || $how eq 'oversized' || $how eq 'cut_mid_row')
	{
		my $claim = $how eq 'huge' ? 1 << 30 : $how eq 'oversized' ? 0x7ffffff0 : 100;
		$$out .= FakePg::msg('d', $data[0]);
		$$out .= 'd' . pack('N', $claim) . "2\ttw";
		$self->send_bytes($$out) or return 'gone';
		$$out = '';
		$self->hang_up if $how eq 'cut_mid_row';
		return $self->common_misbehaviour('hang', $out);
	}

	$$out .= FakePg::msg('d', $_) for @data;
	$$out .= FakePg::msg('c', '') . FakePg::command_complete('COPY ' . scalar @ROWS);
	return 'ok';
}

# Answer a FETCH n FROM CURSOR: the rows on its first, none after.
sub fetch
{
	my ($self, $how, $cursor, $out) = @_;
	my $common = $self->common_misbehaviour($how, $out);
	return $common if defined $common;

	my @rows = $self->{fetched}{$cursor}++ ? () : @ROWS;
	my $limit = $self->{limit}{$cursor};
	splice(@rows, $limit) if defined $limit && $limit < @rows;
	if ($how eq 'copy_out')
	{
		$$out .= FakePg::copy_response('H', 0, 2);
		$$out .= FakePg::msg('d', "$_->[0]\t$_->[1]\n") for @rows;
		$$out .= FakePg::msg('c', '') . FakePg::command_complete('COPY ' . scalar @rows);
		return 'ok';
	}
	$$out .= FakePg::row_description([ 'id', $INT4OID ], [ 'v', $TEXTOID ]);
	if ($how eq 'short_datarow')
	{
		$$out .= FakePg::data_row('1');
		$$out .= FakePg::command_complete('FETCH 1');
		return 'ok';
	}
	if ($how eq 'cut_mid_row')
	{
		my $row = FakePg::data_row(@{ $rows[0] // $ROWS[0] });
		$self->send_bytes($$out . substr($row, 0, 9)) or return 'gone';
		$self->hang_up;
	}
	$$out .= FakePg::data_row(@$_) for @rows;
	$$out .= FakePg::command_complete('FETCH ' . scalar @rows);
	return 'ok';
}

1;
