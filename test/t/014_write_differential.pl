# test/t/014_write_differential.pl
#   Differential test of writes: random units of INSERT, COPY, UPDATE and
#   DELETE in random transaction shapes, generated from a seed, run at the
#   same time on a partitioned table of async_fdw partitions, on one of
#   postgres_fdw partitions and on a local partitioned table with the same
#   constraints.  Each statement's rows, row count or SQLSTATE is compared
#   with the local table's; after each unit, the tables' contents, read
#   through the wrappers and straight from the shards.
#
# Environment:
#   AFDW_DIFF_SEED     the seed (default a fixed one; "random" for a new one)
#   AFDW_DIFF_UNITS    how many units to run (default 300, about a minute)
#   AFDW_DIFF_VERBOSE  1: print every unit's SQL as it is generated
#   AFDW_DIFF_DUMP     a directory: write each unit's async_fdw script there
#                      (unitN.sql, COPY data included), to replay it
#   AFDW_DIFF_TIMEOUT  the coordinator's statement_timeout (default 60s)
#
# The local table is the reference: async_fdw must return its rows and row
# counts, fail with its SQLSTATE, and leave the same rows, on the shards
# too.  postgres_fdw runs the same units as a third opinion: where it
# differs from the local table, the difference is noted, not failed.
#
# Neighbours: 005_differential.pl does the same for reads (its habits:
# the seed, the units, the report); 013_writes.pl tests the writes' shape
# on the wire (COPY per shard, concurrency).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

my $seed = $ENV{AFDW_DIFF_SEED} // '';
$seed = int(time() * 1000) % 1000000007 if $seed eq 'random';
$seed = 141414 if $seed eq '';
die "AFDW_DIFF_SEED must be an integer" unless $seed =~ /^\d+$/;
my $nunits = $ENV{AFDW_DIFF_UNITS} // 300;
my $verbose = $ENV{AFDW_DIFF_VERBOSE} // 0;

diag("write differential test: seed $seed, $nunits units (AFDW_DIFF_SEED=$seed to repeat)");
srand($seed);

########################################################################
# The clusters.  Shard 1 holds two partitions of each wrapper (one server
# object), shard 2 the third.  t1..t3 are async_fdw's, p1..p3
# postgres_fdw's.  A CHECK constraint (b >= 0) that some statements break
# on purpose, the primary key others break.

my $BASE = 1500;	# keys 1..$BASE after each reset
my @shards;
for my $i (1 .. 2)
{
	my $node = PostgreSQL::Test::Cluster->new("wdshard$i");
	$node->init;
	$node->append_conf('postgresql.conf', "max_connections = 40\nlog_statement = none\n");
	# Writes to several shards commit with two-phase commit (auto).
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 10\n");
	$node->start;
	my @names = $i == 1 ? qw(t1 t2 p1 p2) : qw(t3 p3);
	$node->safe_psql('postgres',
		join '', map { "CREATE TABLE $_ (a int PRIMARY KEY, b int CHECK (b >= 0), c text);\n" } @names);
	push @shards, $node;
}
my $coord = PostgreSQL::Test::Cluster->new('wdcoord');
$coord->init;
$coord->append_conf('postgresql.conf',
	"max_connections = 40\nlog_statement = none\nstatement_timeout = '" . ($ENV{AFDW_DIFF_TIMEOUT} // '60s') . "'\nlock_timeout = '30s'\n"
	  . "log_min_duration_statement = 2000\n"
	  # Commits on both shards and reads of both go under the commit fence.
	  . "shared_preload_libraries = 'async_fdw'\n");
$coord->start;

my $coord_sql = q{
	CREATE EXTENSION async_fdw;
	CREATE EXTENSION postgres_fdw;
	CREATE EXTENSION dblink;
	-- Not shippable: a condition or a value that forces the row-by-row path.
	CREATE FUNCTION nship(int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
	  AS $$ BEGIN RETURN $1 % 3 = 1; END $$;
	CREATE FUNCTION nval(int) RETURNS int LANGUAGE plpgsql IMMUTABLE
	  AS $$ BEGIN RETURN coalesce($1, 0) + 1; END $$;
	-- A table's rows, as count:md5 of its rows in key order.
	CREATE FUNCTION dg(q text) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE r text;
	BEGIN
	  EXECUTE 'SELECT count(*) || '':'' || md5(coalesce(string_agg(format(''%s|%s|%s'', a, '
	    || 'coalesce(b::text, ''N''), coalesce(quote_literal(c), ''N'')), '';'' ORDER BY a), '''')) '
	    || 'FROM (' || q || ') x' INTO r;
	  RETURN r;
	END $$;
	CREATE TABLE l_t (a int PRIMARY KEY, b int CHECK (b >= 0), c text) PARTITION BY HASH (a);
	CREATE TABLE a_t (a int, b int, c text) PARTITION BY HASH (a);
	CREATE TABLE p_t (a int, b int, c text) PARTITION BY HASH (a);
};
for my $i (1 .. 2)
{
	my ($host, $port) = ($shards[ $i - 1 ]->host, $shards[ $i - 1 ]->port);
	$coord_sql .= qq{
		CREATE SERVER as$i FOREIGN DATA WRAPPER async_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres', batch_size '100',
		           fetch_mode 'auto');
		CREATE USER MAPPING FOR CURRENT_USER SERVER as$i;
		CREATE SERVER ps$i FOREIGN DATA WRAPPER postgres_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres', batch_size '100');
		CREATE USER MAPPING FOR CURRENT_USER SERVER ps$i;
	};
}
for my $i (1 .. 3)
{
	my $r = $i - 1;
	my $s = $i == 3 ? 2 : 1;
	$coord_sql .= qq{
		CREATE TABLE l_t$i PARTITION OF l_t FOR VALUES WITH (MODULUS 4, REMAINDER $r);
		CREATE FOREIGN TABLE a_t$i PARTITION OF a_t FOR VALUES WITH (MODULUS 4, REMAINDER $r)
		  SERVER as$s OPTIONS (table_name 't$i');
		CREATE FOREIGN TABLE p_t$i PARTITION OF p_t FOR VALUES WITH (MODULUS 4, REMAINDER $r)
		  SERVER ps$s OPTIONS (table_name 'p$i');
	};
}
# The fourth partition is local on every side: rows move from it into the
# foreign ones (an UPDATE moves no row out of a foreign partition: the
# executor hands it to the wrapper as it is, whose remote table has no
# partition constraint; postgres_fdw's rows stay alike).
for my $w (qw(l a p))
{
	# l_t4 takes l_t's constraints.
	$coord_sql .= "CREATE TABLE ${w}_t4 PARTITION OF ${w}_t"
	  . ($w eq 'l' ? '' : ' (PRIMARY KEY (a), CHECK (b >= 0))')
	  . " FOR VALUES WITH (MODULUS 4, REMAINDER 3);\n";
}
$coord->safe_psql('postgres', $coord_sql);

# The partition of each key from -5000 to 5000, for the UPDATEs of the
# partition key.
my %part_of;
my @keys_of;
for my $r (0 .. 3)
{
	my @k = split /,/, $coord->safe_psql('postgres',
		"SELECT string_agg(g::text, ',') FROM generate_series(-5000, 5000) g"
		  . " WHERE satisfies_hash_partition('l_t'::regclass, 4, $r, g)");
	$part_of{$_} = $r for @k;
	$keys_of[$r] = \@k;
}

########################################################################
# The generator.  Every choice comes from rand() after srand($seed).

sub rint { my ($lo, $hi) = @_; return $lo + int(rand($hi - $lo + 1)); }
sub pick { return $_[ int(rand(scalar @_)) ]; }
sub chance { return rand() < $_[0]; }

sub pickw
{
	my $total = 0;
	$total += $_->[0] for @_;
	my $r = rand($total);
	for (@_)
	{
		return $_->[1] if ($r -= $_->[0]) < 0;
	}
	return $_[-1][1];
}

# Texts that need escaping in a literal or in COPY's text format (undef:
# NULL).
my @TEXTS = (
	'', undef, "tab\there", "new\nline", "cr\r\nlf", 'back\slash', '\N', "\\\\N", '\.',
	"quote's \"double\"", 'ünï ✓ €', ' padded ', 'NULL', "all\tof\nthem\\at once'", 'x' x 2500,
	"\\", "end\\");

# lit(value): an SQL literal of it.
sub lit
{
	my ($v) = @_;
	return 'NULL' unless defined $v;
	my $e = $v =~ s/\\/\\\\/gr;
	$e =~ s/'/''/g;
	$e =~ s/\t/\\t/g;
	$e =~ s/\n/\\n/g;
	$e =~ s/\r/\\r/g;
	return "E'$e'";
}

# copy_field(value): it in COPY's text format.
sub copy_field
{
	my ($v) = @_;
	return '\N' unless defined $v;
	my $e = $v =~ s/\\/\\\\/gr;
	$e =~ s/\t/\\t/g;
	$e =~ s/\n/\\n/g;
	$e =~ s/\r/\\r/g;
	return $e;
}

sub rtext { return chance(0.45) ? 'v' . rint(0, 999) : pick(@TEXTS); }
sub rb { return chance(0.1) ? undef : rint(0, 999); }

# The text of row g in a generated load: the same list, in SQL.
sub text_case
{
	my ($salt) = @_;
	my $n = scalar(@TEXTS) + 3;
	my $s = "CASE (g + $salt) % $n";
	for my $i (0 .. $#TEXTS)
	{
		my $l = length($TEXTS[$i] // '') > 100 ? "repeat('x', 2500)" : lit($TEXTS[$i]);
		$s .= " WHEN $i THEN $l";
	}
	return "$s ELSE 'v' || g END";
}

# Keys: the base rows 1..$BASE, fresh ones never used before (also not by a
# rolled-back statement), and negative ones made by moving rows.
my $next_key = 100000;

sub fresh
{
	my ($n) = @_;
	die "fresh($n)" if defined $n && $n < 0;
	my $k = $next_key;
	$next_key += ($n // 1) + 1;
	return $k;
}

sub some_key
{
	return pickw([ 5, sub { rint(1, $BASE) } ], [ 4, sub { rint(100000, $next_key) } ],
		[ 1, sub { -rint(1, $BASE) } ])->();
}

# window(): a range of keys, likely to hold some rows.
sub window
{
	my $lo = some_key();
	my $w = pickw([ 3, rint(0, 10) ], [ 3, rint(10, 100) ], [ 1, rint(100, 400) ]);
	return ($lo, $lo + $w);
}

my @SHIPPABLE = (
	'a % 5 = 2', 'b < 500', 'b IS NULL', 'c IS NULL', "c LIKE 'v%'", "c = ''", 'length(c) > 5',
	"c ~ '\\\\'", "c = E'\\\\N'", 'b % 2 = 0', "c <> 'v1'",
);

# cond(may_not_ship): an extra condition, shippable or not, or none.
sub cond
{
	my ($nship) = @_;
	my $r = rand();
	return '' if $r < 0.3;
	return ' AND ' . pick('nship(a)', 'nship(b)', 'NOT nship(a)') if $nship && $r < 0.6;
	return ' AND ' . pick(@SHIPPABLE);
}

sub returning
{
	my ($p) = @_;
	return '' unless chance($p);
	return ' RETURNING '
	  . pick('*', 'a, b, c', 'a, length(c), c IS NULL', 'b + 1, c', 'a', 'a, nval(b)');
}

# Write statements.  Each returns {sql, copy}; {t} stands for the table.
# fail: undef, 'check' or 'dup' (one kind per statement, so that the
# SQLSTATE does not depend on which row a side meets first).

sub gen_insert_values
{
	my ($fail) = @_;
	my $n = rint(1, 5);
	my $k = fresh($n);
	my @rows = map { [ $k + $_, rb(), rtext() ] } 0 .. $n - 1;
	my $conflict = chance(0.2);
	if ($conflict)
	{
		$_->[0] = rint(1, $BASE) for grep { chance(0.4) } @rows;
	}
	$rows[ rint(0, $n - 1) ][1] = -rint(1, 9) if ($fail // '') eq 'check';
	if (($fail // '') eq 'dup')
	{
		if ($n == 1) { push @rows, [ $rows[0][0], rb(), rtext() ]; $n++; }
		my $i = rint(1, $n - 1);
		$rows[$i][0] = $rows[ rint(0, $i - 1) ][0];
	}
	my $cols = chance(0.8) ? '' : ' (a, b, c)';
	return {
		sql => "INSERT INTO {t}$cols VALUES "
		  . join(', ', map { '(' . join(', ', $_->[0], $_->[1] // 'NULL', lit($_->[2])) . ')' } @rows)
		  . ($conflict ? ' ON CONFLICT DO NOTHING' : '')
		  . returning(0.35)
	};
}

sub load_size
{
	return pickw([ 5, rint(1, 20) ], [ 3, rint(21, 150) ], [ 2, rint(150, 800) ],
		[ 2, rint(1000, 3000) ]);
}

sub gen_insert_select
{
	my ($fail) = @_;
	my $n = load_size();
	my $k = fresh($n);
	my ($m, $s) = (rint(1, 50), rint(0, 999));
	my $b = "CASE WHEN (g + $s) % 11 = 0 THEN NULL ELSE (g * $m + $s) % 1000 END";
	my $key = "$k + g";
	$fail = undef if $n < 2 && ($fail // '') eq 'dup';
	if (($fail // '') eq 'check')
	{
		$b = "CASE WHEN g = " . rint(1, $n) . " THEN -1 ELSE $b END";
	}
	elsif (($fail // '') eq 'dup')
	{
		my $x = rint(2, $n);
		$key = "$k + CASE WHEN g = $x THEN " . rint(1, $x - 1) . " ELSE g END";
	}
	my $conflict = chance(0.15);
	$key = "CASE WHEN g % 7 = 0 THEN g ELSE $key END" if $conflict;
	# Rarely, megabytes per partition: a server's tables take turns on its
	# writer's stream.
	my $c = $n > 1500 && chance(0.1) ? "repeat('y', 6000 + g % 100)" : text_case($s);
	return {
		sql => "INSERT INTO {t} SELECT $key, $b, $c"
		  . " FROM generate_series(1, $n) g"
		  . ($conflict ? ' ON CONFLICT DO NOTHING' : '')
		  . ($n <= 200 ? returning(0.3) : '')
	};
}

sub gen_copy
{
	my ($fail) = @_;
	my $n = load_size();
	my $k = fresh($n);
	my @rows = map { [ $k + $_, rb(), rtext() ] } 0 .. $n - 1;
	$fail = undef if $n < 2 && ($fail // '') eq 'dup';
	$rows[ rint(0, $n - 1) ][1] = -1 if ($fail // '') eq 'check';
	if (($fail // '') eq 'dup')
	{
		my $i = rint(1, $n - 1);
		$rows[$i][0] = $rows[ rint(0, $i - 1) ][0];
	}
	my $shape = pickw([ 6, 'abc' ], [ 1, 'ac' ], [ 1, 'cba' ]);
	my %col = (a => 0, b => 1, c => 2);
	my @order = split //, $shape;
	my $data = join '', map {
		my $r = $_;
		join("\t", map { $_ eq 'c' ? copy_field($r->[2]) : ($r->[ $col{$_} ] // '\N') } @order) . "\n"
	} @rows;
	my $cols = $shape eq 'abc' && chance(0.7) ? '' : ' (' . join(', ', @order) . ')';
	return { sql => "COPY {t}$cols FROM STDIN", copy => $data };
}

# INSERT ... SELECT from the table itself: new keys (a fresh block), or the
# same ones (a duplicate key, if the window holds a row).
sub gen_insert_self
{
	my ($fail) = @_;
	my ($lo, $hi) = window();
	my $w = $hi - $lo > 400 ? 400 : $hi - $lo;
	$lo = abs($lo);
	$hi = $lo + $w;
	# Now and then most of the base rows: the scan of the table streams
	# while its rows are written back.
	($lo, $hi) = (rint(1, 300), rint(1000, 1500)) if chance(0.2);
	my $off = fresh($hi - $lo + 1) - $lo;
	my $a = ($fail // '') eq 'dup' ? 'a' : "a + $off";
	my $b = ($fail // '') eq 'check' ? 'b - 1000' : pick('b', 'nval(b)', 'b % 10');
	my $c = pick('c', "c || '+'", 'upper(c)', 'NULL');
	return {
		sql => "INSERT INTO {t} SELECT $a, $b, $c FROM {t} WHERE a BETWEEN $lo AND $hi" . cond(1)
		  . (chance(0.15) ? ' ON CONFLICT DO NOTHING' : '')
		  . returning(0.3)
	};
}

sub gen_update
{
	my ($fail) = @_;
	my ($lo, $hi) = window();
	my @set;
	push @set, pick('b = (b * 7 + ' . rint(0, 99) . ') % 1000', 'b = nval(b)', 'b = length(c)',
		'b = NULL', 'b = ' . rint(0, 999)) if chance(0.7);
	push @set, pick('c = ' . lit(rtext()), "c = c || " . lit(rtext()), 'c = NULL', 'c = upper(c)')
	  if !@set || chance(0.4);
	if (($fail // '') eq 'check')
	{
		@set = grep { !/^b =/ } @set;
		push @set, pick('b = b - 2000', 'b = -1');
	}
	my $where = "a BETWEEN $lo AND $hi";
	if (($fail // '') eq 'div')
	{
		$where .= " AND 1 / (a - " . rint($lo, $hi) . ") > 0";
	}
	else
	{
		$where .= cond(1);
	}
	return { sql => "UPDATE {t} SET " . join(', ', @set) . " WHERE $where" . returning(0.3) };
}

sub gen_delete
{
	my ($fail) = @_;
	my ($lo, $hi) = window();
	my $where = "a BETWEEN $lo AND $hi";
	if (($fail // '') eq 'div')
	{
		$where .= " AND 1 / (a - " . rint($lo, $hi) . ") > 0";
	}
	else
	{
		$where .= cond(1);
	}
	return { sql => "DELETE FROM {t} WHERE $where" . returning(0.3) };
}

# An UPDATE ... FROM or DELETE ... USING of partition 1 joined with another
# by key, so that each of its rows meets one row at most: partition 2 is
# on the same server (async_fdw sends one remote statement joining them),
# partition 3 on the other shard (the rows change one by one).
sub gen_join
{
	my ($fail) = @_;
	my ($lo, $hi) = window();
	my $src = pick(2, 2, 3);
	my $where = 'x.a = s.a + ' . pick(0, 1, -1, 7) . " AND x.a BETWEEN $lo AND $hi";
	$where .= ' AND ' . pick('s.b < 500', 's.c IS NOT NULL', 's.b % 2 = 0', 'x.b > s.b', 'nship(s.a)')
	  if chance(0.6);
	my $ret = chance(0.3)
	  ? ' RETURNING ' . pick('x.*', 'x.a, x.b', 'x.a, s.c', 'x.tableoid IS NOT NULL, x.c', '1')
	  : '';
	if (($fail // '') eq 'check' || chance(0.6))
	{
		my $set = ($fail // '') eq 'check' ? 'b = -1'
		  : pick('b = (x.b + s.b) % 1000', 'c = s.c', 'b = nval(s.b), c = x.c || ' . lit(rtext()),
			'c = upper(s.c)');
		return { sql => "UPDATE {t}1 x SET $set FROM {t}$src s WHERE $where$ret" };
	}
	return { sql => "DELETE FROM {t}1 x USING {t}$src s WHERE $where$ret" };
}

# An UPDATE of the partition key, of rows whose partition the condition
# prunes to: rows of the local partition move to any partition (a row
# moved into a foreign partition that the same UPDATE changes is refused by
# both wrappers, by design), rows of a foreign one stay in theirs.
sub near_key { my $r = shift; my $k; do { $k = pick(@{ $keys_of[$r] }) } while abs($k) > 2000 && chance(0.7); return $k; }

sub gen_move
{
	my ($fail) = @_;
	my $dup = ($fail // '') eq 'dup';
	my ($where, $to);
	if (chance(0.6))
	{
		my @k = map { near_key(3) } 1 .. pickw([ 3, 1 ], [ 1, rint(2, 5) ]);
		$where = @k == 1 ? "a = $k[0]" : 'a IN (' . join(', ', @k) . ')';
		$to = @k == 1 ? pickw([ 3, '-a' ], [ 2, fresh() ], [ 2, near_key(rint(0, 3)) ], [ 1, 'a + ' . (fresh(10001) + 5000) ])
		  : pick('-a', 'a + ' . (fresh(10001) + 5000));
		$to = pick(@k) if $dup && @k > 1;
		$to = rint(1, $BASE) if $dup && @k == 1;
	}
	else
	{
		my $r = rint(0, 3);
		$where = 'a = ' . near_key($r);
		$to = near_key($r);
		$to = pick(grep { $_ > 0 && $_ <= $BASE } @{ $keys_of[$r] }) if $dup;
	}
	my $set = "a = $to";
	$set .= ', c = ' . lit(rtext()) if chance(0.3);
	$set .= ', b = nval(b)' if chance(0.2);
	return { sql => "UPDATE {t} SET $set WHERE $where" . cond(1) . returning(0.3) };
}

sub gen_read
{
	my ($lo, $hi) = window();
	return { read => 1, sql => pickw(
		[ 3, 'SELECT count(*), sum(a), sum(b), count(c), count(DISTINCT c) FROM {t}' ],
		[ 3, "SELECT a, b, c FROM {t} WHERE a BETWEEN $lo AND $hi" . cond(1) ],
		[ 1, "SELECT c, count(*) FROM {t} WHERE a BETWEEN $lo AND $hi GROUP BY c" ],
		[ 1, "SELECT count(*), sum(b) FROM {t} WHERE nship(a)" ],
		[ 1, "SELECT a, b FROM {t} WHERE a BETWEEN $lo AND $hi FOR UPDATE" ],
		[ 1, "SELECT a, c FROM {t} WHERE a = ANY ('{" . join(',', map { some_key() } 1 .. 4) . "}')" ])
	};
}

# Writes in WITH: rows deleted and inserted again under new keys, an
# UPDATE or an INSERT whose rows a query counts.
sub gen_cte
{
	my ($lo, $hi) = window();
	my $w = $hi - $lo > 300 ? 300 : $hi - $lo;
	$lo = abs($lo);
	$hi = $lo + $w;
	my $off = fresh($w + 1) - $lo;
	my $n = load_size();
	my $k = fresh($n);
	return { sql => pick(
		"WITH d AS (DELETE FROM {t} WHERE a BETWEEN $lo AND $hi" . cond(1) . " RETURNING a, b, c)"
		  . " INSERT INTO {t} SELECT a + $off, b, c FROM d" . returning(0.5),
		"WITH u AS (UPDATE {t} SET b = nval(b) WHERE a BETWEEN $lo AND $hi" . cond(1)
		  . " RETURNING a, b) SELECT count(*), sum(a), sum(b) FROM u",
		"WITH i AS (INSERT INTO {t} SELECT $k + g, g % 1000, 'cte' || g FROM generate_series(1, $n) g"
		  . " RETURNING a, c) SELECT count(*), min(a), max(a), count(DISTINCT c) FROM i") };
}

# Prepared writes, run a few times (past five, with a generic plan).
my $nprepared = 0;

sub gen_prepared
{
	my ($fail) = @_;
	my $name = 'w' . ++$nprepared;
	my $m = rint(1, 8);
	my $bad = ($fail // '') eq 'check' ? rint(1, $m) : 0;
	my @s;
	if (chance(0.6))
	{
		@s = ({ sql => "PREPARE $name(int, int, text) AS INSERT INTO {t} VALUES (\$1, \$2, \$3)" . returning(0.4) });
		my $k = fresh($m);
		push @s, map { { sql => "EXECUTE $name($k + $_, " . ($_ == $bad ? -1 : rb() // 'NULL') . ', ' . lit(rtext()) . ')' } } 1 .. $m;
	}
	else
	{
		@s = ({ sql => "PREPARE $name(int, int) AS UPDATE {t} SET b = \$2 WHERE a = \$1" . cond(1) . returning(0.4) });
		push @s, map { { sql => "EXECUTE $name(" . some_key() . ', ' . ($_ == $bad ? -1 : rint(0, 999)) . ')' } } 1 .. $m;
	}
	return (@s, { sql => "DEALLOCATE $name" });
}

# A cursor read in part before a write and in part after it: it sees the
# rows as they were when it was opened (only in a transaction block).
my $ncursors = 0;

sub gen_cursor
{
	my ($fail) = @_;
	my $name = 'c' . ++$ncursors;
	my ($lo, $hi) = window();
	$hi = $lo + 400 if chance(0.3);
	my @w = gen_write(0);
	return (
		{ sql => "DECLARE $name CURSOR FOR SELECT a, b, c FROM {t} WHERE a BETWEEN $lo AND $hi" . cond(1) . ' ORDER BY a',
		  read => 1 },
		{ sql => "FETCH " . rint(1, 20) . " FROM $name", read => 1 },
		@w,
		{ sql => "FETCH ALL FROM $name", read => 1 },
		{ sql => "CLOSE $name", read => 1 });
}

# How each kind of write may fail on purpose.
my %FAILS = (
	insert_values => [qw(check dup)],
	insert_select => [qw(check dup)],
	copy          => [qw(check dup)],
	insert_self   => [qw(check dup)],
	update        => [qw(check div)],
	delete        => [qw(div)],
	move          => [qw(dup)],
	cte           => [undef],
	prepared      => [qw(check)],
	cursor        => [undef],
	join          => [qw(check)]);

# gen_write(p_fail, in_block): a write statement (or a few that go
# together), failing on purpose with p_fail.
sub gen_write
{
	my ($pfail, $block) = @_;
	my $kind = pickw([ 20, 'insert_values' ], [ 15, 'insert_select' ], [ 12, 'copy' ],
		[ 5, 'insert_self' ], [ 15, 'update' ], [ 10, 'delete' ], [ 7, 'move' ], [ 4, 'cte' ],
		[ 4, 'prepared' ], [ $block ? 4 : 0, 'cursor' ], [ 6, 'join' ]);
	my $fail;
	$fail = pick(@{ $FAILS{$kind} }) if chance($pfail);
	no strict 'refs';
	my @st = &{"gen_$kind"}($fail);
	$_->{kind} //= $kind . ($fail ? "/$fail" : '') for @st;
	return @st;
}

# Statements of a transaction: writes, each maybe followed by a read.
sub gen_stmts
{
	my ($n, $pfail, $preads, $block) = @_;
	my @s;
	for (1 .. $n)
	{
		push @s, gen_write($pfail, $block);
		push @s, gen_read() if chance($preads);
	}
	return @s;
}

sub plain { return { sql => $_[0], kind => 'xact' }; }

# Options: batch_size of servers and tables, fetch_mode.  The tables'
# options as they are now, to ADD, SET or DROP them.
my %topt;

sub gen_settings
{
	my %alter = (a => '', p => '');
	my @what;
	for (1 .. rint(1, 2))
	{
		my $v = pick(1, 2, 10, 100, 1000);
		my $r = rand();
		if ($r < 0.35)
		{
			my $s = rint(1, 2);
			$alter{a} .= "ALTER SERVER as$s OPTIONS (SET batch_size '$v');\n";
			$alter{p} .= "ALTER SERVER ps$s OPTIONS (SET batch_size '$v');\n";
			push @what, "server $s batch_size $v";
		}
		elsif ($r < 0.7)
		{
			my $i = rint(1, 3);
			my $op = $topt{"t$i.batch_size"} ? (chance(0.3) ? 'DROP' : 'SET') : 'ADD';
			my $val = $op eq 'DROP' ? '' : " '$v'";
			$topt{"t$i.batch_size"} = $op ne 'DROP';
			$alter{a} .= "ALTER FOREIGN TABLE a_t$i OPTIONS ($op batch_size$val);\n";
			$alter{p} .= "ALTER FOREIGN TABLE p_t$i OPTIONS ($op batch_size$val);\n";
			push @what, "table $i batch_size $op$val";
		}
		elsif ($r < 0.85)
		{
			my $s = rint(1, 2);
			my $m = pick(qw(auto stream cursor));
			$alter{a} .= "ALTER SERVER as$s OPTIONS (SET fetch_mode '$m');\n";
			push @what, "server $s fetch_mode $m";
		}
		else
		{
			my $i = rint(1, 3);
			my $m = pick(qw(auto stream cursor));
			my $op = $topt{"t$i.fetch_mode"} ? (chance(0.3) ? 'DROP' : 'SET') : 'ADD';
			my $val = $op eq 'DROP' ? '' : " '$m'";
			$topt{"t$i.fetch_mode"} = $op ne 'DROP';
			$alter{a} .= "ALTER FOREIGN TABLE a_t$i OPTIONS ($op fetch_mode$val);\n";
			push @what, "table $i fetch_mode $op$val";
		}
	}
	return (\%alter, join('; ', @what));
}

# A write that a PL/pgSQL block can run as it is: one statement, no rows
# returned, no COPY.
sub gen_quiet_write
{
	my ($pfail) = @_;
	# By key: one partition, sent whole (the shape that may carry a COMMIT).
	if (chance(0.35))
	{
		my $k = some_key();
		return chance($pfail) ? "UPDATE {t} SET b = -1 WHERE a = $k"
		  : chance(0.7) ? "UPDATE {t} SET b = " . rint(0, 999) . ", c = " . lit(rtext()) . " WHERE a = $k"
		  : "DELETE FROM {t} WHERE a = $k";
	}
	for (;;)
	{
		my $kind = pickw([ 20, 'insert_values' ], [ 15, 'insert_select' ], [ 5, 'insert_self' ],
			[ 15, 'update' ], [ 10, 'delete' ], [ 7, 'move' ], [ 6, 'join' ]);
		my $fail;
		$fail = pick(@{ $FAILS{$kind} }) if chance($pfail);
		no strict 'refs';
		my @st = &{"gen_$kind"}($fail);
		next if @st != 1 || defined $st[0]{copy} || $st[0]{sql} =~ /RETURNING/;
		return $st[0]{sql};
	}
}

# Writes run by a function (a DO block) rather than sent by the client:
# some in an inner block that catches any error, and the block itself
# failing at its end at times, after its writes.  Only the client's
# statement may end a remote transaction early: the block's writes must
# go (or stay) with the rest of the transaction.
sub gen_function
{
	my @body = map { gen_quiet_write(0.1) . ';' } 1 .. rint(1, 3);
	if (chance(0.5))
	{
		my @inner = map { gen_quiet_write(0.4) . ';' } 1 .. rint(1, 2);
		splice @body, rint(0, scalar @body), 0,
		  'BEGIN', @inner, 'EXCEPTION WHEN OTHERS THEN NULL;', 'END;';
	}
	push @body, "RAISE EXCEPTION 'the block fails after its writes' USING ERRCODE = 'P0001';"
	  if chance(0.35);
	return { sql => "DO \$do\$\nBEGIN\n" . join("\n", @body) . "\nEND\n\$do\$",
		kind => 'function' };
}

# gen_unit(n): settings, then statements in a transaction shape.
sub gen_unit
{
	my ($n) = @_;
	my $u = { n => $n, alter => { a => '', p => '' }, settings => 'unchanged' };
	($u->{alter}, $u->{settings}) = gen_settings() if chance(0.25);
	my $shape = pickw([ 30, 'autocommit' ], [ 30, 'block' ], [ 25, 'savepoint' ],
		[ 15, 'function' ]);
	$u->{shape} = $shape;
	my @s;
	if ($shape eq 'autocommit')
	{
		@s = gen_stmts(rint(1, 3), 0.15, 0.3);
	}
	elsif ($shape eq 'function')
	{
		# Mostly as the client's only statement (its own transaction).
		@s = map { (gen_function(), chance(0.3) ? gen_read() : ()) } 1 .. rint(1, 2);
		@s = (plain('BEGIN'), @s, plain(chance(0.7) ? 'COMMIT' : 'ROLLBACK'))
		  if chance(0.25);
	}
	elsif ($shape eq 'block')
	{
		@s = (plain(pick('BEGIN', 'BEGIN', 'BEGIN ISOLATION LEVEL REPEATABLE READ')),
			gen_stmts(rint(1, 5), 0.1, 0.5, 1),
			plain(chance(0.7) ? 'COMMIT' : 'ROLLBACK'));
	}
	else
	{
		@s = (plain('BEGIN'), gen_stmts(rint(0, 2), 0.05, 0.5, 1), plain('SAVEPOINT s1'),
			gen_stmts(rint(1, 3), 0.25, 0.5, 1));
		if (chance(0.3))
		{
			push @s, plain('SAVEPOINT s2'), gen_stmts(rint(1, 2), 0.2, 0.5, 1);
			push @s, plain(pick('ROLLBACK TO SAVEPOINT s2', 'RELEASE SAVEPOINT s2'));
		}
		my $end = pickw([ 5, 'ROLLBACK TO SAVEPOINT s1' ], [ 3, 'RELEASE SAVEPOINT s1' ], [ 2, '' ]);
		push @s, plain($end) if $end;
		push @s, gen_read() if chance(0.6);
		push @s, gen_stmts(rint(0, 2), 0.05, 0.5, 1);
		push @s, plain(chance(0.75) ? 'COMMIT' : 'ROLLBACK');
	}
	$u->{stmts} = \@s;
	return $u;
}

my @units = map { gen_unit($_) } 1 .. $nunits;

########################################################################
# Running the units: a psql session per side, the three running each unit
# at the same time; a fourth session checks the tables after it.

my %SIDES = (l => 'local', a => 'async_fdw', p => 'postgres_fdw');

sub for_side
{
	my ($sql, $side) = @_;
	$sql =~ s/\{t\}/${side}_t/g;
	return $sql;
}

# unit_script(unit, side, markers): the unit's SQL for one side, each
# statement followed by markers carrying its SQLSTATE, row count and error.
sub unit_script
{
	my ($u, $side, $markers, $short) = @_;
	my $s = $side eq 'l' ? '' : $u->{alter}{$side};
	$s .= "\\echo '\@\@S' :SQLSTATE\n" if $markers && $s ne '';
	my $j = 0;
	for my $st (@{ $u->{stmts} })
	{
		$s .= "\\warn '\@\@B $u->{n} $j'\n\\set VERBOSITY verbose\n" if $markers && defined $st->{copy};
		$s .= for_side($st->{sql}, $side) . ";\n";
		if (defined $st->{copy})
		{
			my $data = $st->{copy};
			if ($short && ($data =~ tr/\n//) > 12)
			{
				my @l = split /\n/, $data;
				$data = join("\n", @l[ 0 .. 9 ]) . "\n... (" . scalar(@l) . " lines)\n";
			}
			$s .= $data . "\\.\n";
			$s .= "\\set VERBOSITY terse\n\\warn '\@\@A $u->{n} $j'\n" if $markers;
		}
		$s .= "\\echo '\@\@R' $u->{n} $j :SQLSTATE :ROW_COUNT\n\\echo '\@\@M' :LAST_ERROR_MESSAGE '\@\@E'\n"
		  if $markers;
		$j++;
	}
	$s .= "\\echo '\@\@U' $u->{n}\n\\warn '\@\@U $u->{n}'\n" if $markers;
	return $s;
}

my $SETUP = "\\pset format unaligned\n\\pset tuples_only on\n\\pset fieldsep '\\037'\n"
  . "\\pset recordsep_zero\n\\pset null '<null>'\n";

sub start_session
{
	my ($name) = @_;
	my $s = { name => $name, in => $SETUP, out => '', err => '' };
	$s->{h} = IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=0', '-v', 'VERBOSITY=terse', '-d',
			$coord->connstr('postgres') ],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err});
	return $s;
}

# run_all(marker, sessions): pump the sessions until each printed MARKER;
# false for those that ended first.
sub run_all
{
	my ($marker, @ss) = @_;
	my $deadline = time() + 300;
	my %done;
	while (keys %done < @ss)
	{
		my $progress = 0;
		for my $s (@ss)
		{
			next if $done{ $s->{name} };
			if (!$s->{h}->pumpable)
			{
				$done{ $s->{name} } = 'ended';
				next;
			}
			$s->{h}->pump_nb;
			$done{ $s->{name} } = 'ok'
			  if index($s->{out}, $marker) >= 0
			  && (!defined $s->{errmark} || index($s->{err}, $s->{errmark}) >= 0);
		}
		die "sessions did not finish ($marker) in 300 s" if time() > $deadline;
		usleep(1000) if keys %done < @ss;
	}
	return map { $done{ $_->{name} } eq 'ok' } @ss;
}

my %sess;
my $chk;

sub start_all
{
	$sess{$_} = start_session($_) for qw(l a p);
	$chk = start_session('chk');
	my ($h1, $p1) = ($shards[0]->host, $shards[0]->port);
	my ($h2, $p2) = ($shards[1]->host, $shards[1]->port);
	$chk->{in} .= "SELECT dblink_connect('s1', 'host=$h1 port=$p1 dbname=postgres');\n"
	  . "SELECT dblink_connect('s2', 'host=$h2 port=$p2 dbname=postgres');\n\\echo '\@\@READY'\n";
	run_all('@@READY', $chk) or die "checker: $chk->{err}";
	$chk->{out} = '';
}

sub stop_all
{
	for my $s (values(%sess), $chk)
	{
		$s->{h}->kill_kill if $s->{h}->pumpable;
		eval { $s->{h}->finish };
	}
}

# chk_query(sql): the checker's rows of SQL, as lists of fields.
my $chk_n = 0;
sub chk_query
{
	my ($sql) = @_;
	$chk_n++;
	$chk->{out} = '';
	$chk->{err} = '';
	$chk->{in} .= "$sql;\n\\echo '\@\@C$chk_n'\n";
	run_all("\@\@C$chk_n\n", $chk) or die "the checker session ended: $chk->{err}";
	die "checker: $chk->{err}" if $chk->{err} =~ /ERROR/;
	my $out = $chk->{out} =~ s/\@\@C$chk_n\n$//r;
	$out =~ s/\n$//;
	return map { [ split /\037/, $_, -1 ] } split /\0/, $out;
}

# The tables to compare, by side: where each partition's rows are read.
sub remote { return "SELECT * FROM dblink('s$_[0]', 'SELECT a, b, c FROM $_[1]') AS r(a int, b int, c text)"; }
my @PLACES;
for my $i (1 .. 3)
{
	my $s = $i == 3 ? 2 : 1;
	push @PLACES, [ "l_t$i", "SELECT * FROM l_t$i" ],
	  [ "a_t$i", "SELECT * FROM a_t$i" ], [ "shard $s t$i", remote($s, "t$i") ],
	  [ "p_t$i", "SELECT * FROM p_t$i" ], [ "shard $s p$i", remote($s, "p$i") ];
}
push @PLACES, map { [ "${_}_t4", "SELECT * FROM ${_}_t4" ] } qw(l a p);

# reset(): every side back to the base rows, written on the shards
# directly.
sub reset_tables
{
	my $sql = "SELECT dblink_exec('s1', 'TRUNCATE t1, t2, p1, p2');\n"
	  . "SELECT dblink_exec('s2', 'TRUNCATE t3, p3');\nTRUNCATE l_t, a_t4, p_t4;\n"
	  . "INSERT INTO l_t SELECT g, CASE WHEN g % 13 = 0 THEN NULL ELSE g % 1000 END, "
	  . text_case(0) . " FROM generate_series(1, $BASE) g;\n";
	for my $i (1 .. 3)
	{
		my $s = $i == 3 ? 2 : 1;
		for my $t ("t$i", "p$i")
		{
			$sql .= "SELECT dblink_exec('s$s', 'INSERT INTO $t VALUES ' || string_agg(format('(%s, %s, %s)', "
			  . "a, coalesce(b::text, 'NULL'), quote_nullable(c)), ', ')) FROM l_t$i;\n";
		}
	}
	$sql .= "INSERT INTO a_t4 SELECT * FROM l_t4;\nINSERT INTO p_t4 SELECT * FROM l_t4;\n";
	chk_query($sql);
}

# check_tables(): undef when every place holds the local rows, else what
# differs; and whether postgres_fdw's places differ.
sub check_tables
{
	my @r = chk_query('SELECT ' . join(', ', map { 'dg(' . lit($_->[1]) . ')' } @PLACES));
	my %d;
	@d{ map { $_->[0] } @PLACES } = @{ $r[0] };
	my (@abad, @pbad);
	for my $i (1 .. 4)
	{
		my $s = $i == 3 ? 2 : 1;
		for my $place ($i == 4 ? qw(a_t4 p_t4) : ("a_t$i", "shard $s t$i", "p_t$i", "shard $s p$i"))
		{
			next if $d{$place} eq $d{"l_t$i"};
			my ($q) = map { $_->[1] } grep { $_->[0] eq $place } @PLACES;
			my @diff = chk_query("(SELECT 'only local', * FROM l_t$i EXCEPT ALL SELECT 'only local', * FROM ($q) x) "
				  . "UNION ALL (SELECT 'only $place', * FROM ($q) x EXCEPT ALL SELECT 'only $place', * FROM l_t$i) "
				  . "ORDER BY 2 LIMIT 12");
			my $what = "$place differs from l_t$i ($d{$place} against $d{\"l_t$i\"}):"
			  . join('', map { "\n    " . join(' | ', @$_) } @diff);
			if ($place =~ /^p_| p\d/) { push @pbad, $what; } else { push @abad, $what; }
		}
	}
	return (\@abad, \@pbad);
}

# results(session, unit): [[sqlstate, row count, message, [rows]] per statement].
sub results
{
	my ($s, $u) = @_;
	my @res;
	my $out = $s->{out};
	my $pos = 0;
	while ($out =~ /\@\@R (\d+) (\d+) (\S+) (\d+)\n\@\@M ?(.*?) ?\@\@E\n/gs)
	{
		my ($n, $j, $state, $count, $msg) = ($1, $2, $3, $4, $5);
		my $rows = substr($out, $pos, $-[0] - $pos);
		$pos = $+[0];
		$rows =~ s/^\@\@S \S+\n//;
		$rows =~ s/\n$//;
		$res[$j] = [ $state, $count, $msg, [ split /\0/, $rows ] ];
	}

	# psql 15 sets no SQLSTATE for a COPY FROM STDIN that failed: its error
	# is read from the messages it printed.
	for my $j (0 .. $#{ $u->{stmts} })
	{
		next unless defined $u->{stmts}[$j]{copy} && defined $res[$j];
		if ($s->{err} =~ /\@\@B $u->{n} $j\n(.*?)\@\@A $u->{n} $j\n/s)
		{
			my $text = $1;
			$res[$j] = [ $1, 0, $2, [] ] if $text =~ /ERROR:  ([0-9A-Z]{5}): ([^\n]*)/;
		}
	}
	return \@res;
}

sub show
{
	my ($r) = @_;
	return '(missing: the session ended)' unless defined $r;
	return "ERROR $r->[0]: $r->[2]" if $r->[0] ne '00000';
	my @rows = map { s/\037/ | /gr =~ s/\n/\\n/gr =~ s/\t/\\t/gr =~ s/\r/\\r/gr } sort @{ $r->[3] };
	my $more = @rows > 12 ? "\n  ... (" . scalar(@rows) . " rows)" : '';
	splice(@rows, 12) if @rows > 12;
	return "row count $r->[1], " . scalar(@{ $r->[3] }) . " rows" . join('', map { "\n  $_" } @rows) . $more;
}

# differs(x, y): what differs between two results of a statement, or ''.
sub differs
{
	my ($x, $y) = @_;
	return 'no result (the session ended?)' unless defined $x;
	return 'different SQLSTATEs' if $x->[0] ne $y->[0];
	return '' if $x->[0] ne '00000';
	return 'different row counts' if $x->[1] ne $y->[1];
	my @x = sort @{ $x->[3] };
	my @y = sort @{ $y->[3] };
	return 'different numbers of rows' if @x != @y;
	for my $i (0 .. $#x)
	{
		return 'different rows' if $x[$i] ne $y[$i];
	}
	return '';
}

########################################################################
# The run.

my $failures = 0;
my $pg_notes = 0;
my %stats = (statements => 0, errors => 0, rows => 0, resets => 0, copies => 0, loads => 0);
my %kinds;
my $started = time();
start_all();
reset_tables();
my $since_reset = 0;
for my $u (@units)
{
	note("unit $u->{n} [$u->{shape}; $u->{settings}]\n" . unit_script($u, 'a', 0, 1)) if $verbose;
	if ($ENV{AFDW_DIFF_DUMP})
	{
		open my $fh, '>', "$ENV{AFDW_DIFF_DUMP}/unit$u->{n}.sql" or die $!;
		print $fh unit_script($u, 'a', 0);
		close $fh;
	}
	for my $side (qw(l a p))
	{
		my $s = $sess{$side};
		$s->{out} = '';
		$s->{err} = '';
		$s->{in} .= unit_script($u, $side, 1);
		$s->{errmark} = "\@\@U $u->{n}\n";
	}
	my @ok = run_all("\@\@U $u->{n}\n", map { $sess{$_} } qw(l a p));
	my %res = map { $_ => results($sess{$_}, $u) } qw(l a p);
	my $report = sub {
		my ($what) = @_;
		return "seed $seed, unit $u->{n} ($u->{shape}): $what\nsettings: $u->{settings}\n"
		  . "the unit, as run through async_fdw:\n" . unit_script($u, 'a', 0, 1);
	};
	my $bad = 0;

	# Each statement, against the local table's.
	for my $j (0 .. $#{ $u->{stmts} })
	{
		my $st = $u->{stmts}[$j];
		my $l = $res{l}[$j];
		if (!defined $l)
		{
			ok(0, "unit $u->{n}: the local session ran statement $j") or diag($report->("no local result\n$sess{l}{err}"));
			$bad = 1;
			last;
		}
		$stats{statements}++;
		$stats{errors}++ if $l->[0] ne '00000';
		$stats{rows} += $l->[1] if $l->[0] eq '00000';
		$kinds{ ($st->{kind} // 'read') . ($l->[0] eq '00000' ? '' : " $l->[0]") }++;
		$stats{copies}++ if defined $st->{copy} && $l->[0] eq '00000';
		$stats{loads}++ if ($st->{kind} // '') =~ /^(copy|insert_select)/ && $l->[0] eq '00000' && $l->[1] > 100;
		my $d = differs($res{a}[$j], $l);
		if ($d ne '')
		{
			$failures++;
			ok(0, "unit $u->{n} agrees") or diag($report->("statement $j: $d")
				  . "statement: " . for_side($st->{sql}, 'a') . "\n"
				  . "async_fdw: " . show($res{a}[$j]) . "\n"
				  . "local: " . show($l) . "\n"
				  . "postgres_fdw: " . show($res{p}[$j]) . "\n"
				  . "async_fdw's stderr:\n$sess{a}{err}") if $failures <= 10;
			$bad = 1;
			last;
		}
		my $pd = differs($res{p}[$j], $l);
		if ($pd ne '' && !$bad)
		{
			$pg_notes++;
			note($report->("postgres_fdw, statement $j: $pd")
				  . "postgres_fdw: " . show($res{p}[$j]) . "\nlocal: " . show($l)) if $pg_notes <= 3;
			$bad = 2;
		}
	}
	if ($sess{a}{out} =~ /\@\@S (?!00000)/ || $sess{p}{out} =~ /\@\@S (?!00000)/)
	{
		$failures++;
		ok(0, "unit $u->{n}: the settings apply") or diag($report->("a setting failed: $sess{a}{err} $sess{p}{err}"));
	}

	# A session that ended: the coordinator crashed, or psql died.
	if (grep { !$_ } @ok)
	{
		$failures++;
		ok(0, "unit $u->{n}: every session survives")
		  or diag($report->('a session ended') . "async_fdw's stderr:\n$sess{a}{err}");
		stop_all();
		# A crash shuts the coordinator down (restart_after_crash is off).
		$coord->stop('immediate', fail_ok => 1);
		$coord->start;
		start_all();
		reset_tables();
		$since_reset = 0;
		next;
	}

	# The tables, through each wrapper and on the shards.
	my ($abad, $pbad) = check_tables();
	if (@$abad && $bad != 1)
	{
		$failures++;
		ok(0, "unit $u->{n}: the tables agree")
		  or diag($report->('the tables differ afterwards') . join("\n", @$abad)
			  . "\nthe statements' results (async_fdw):\n"
			  . join("\n", map { "  $_: " . show($res{a}[$_]) } 0 .. $#{ $u->{stmts} }))
		  if $failures <= 10;
	}
	if (@$pbad && !@$abad)
	{
		$pg_notes++;
		note($report->('postgres_fdw\'s tables differ') . join("\n", @$pbad)) if $pg_notes <= 3;
	}
	$since_reset++;
	if ($bad || @$abad || @$pbad || $since_reset >= 60)
	{
		reset_tables();
		$stats{resets}++;
		$since_reset = 0;
	}
}
stop_all();
my $elapsed = time() - $started;
note(sprintf("%d units in %.1f s: %d statements, %d failing, %d rows written or read, "
	  . "%d COPYs, %d loads past 100 rows, %d resets; postgres_fdw differed %d times",
	scalar(@units), $elapsed, $stats{statements}, $stats{errors}, $stats{rows},
	$stats{copies}, $stats{loads}, $stats{resets}, $pg_notes));
note(join("\n", map { "  $_: $kinds{$_}" } sort keys %kinds));
# Not vacuous: the statements ran, some failed on purpose, most did not,
# and the loads were large enough to stream.
cmp_ok($stats{statements}, '>=', 3 * $nunits, 'the units ran their statements');
cmp_ok($stats{errors}, '>', $nunits / 30, 'some statements fail');
cmp_ok($stats{errors}, '<', $stats{statements} / 4, 'most statements succeed');
cmp_ok($stats{loads}, '>', $nunits / 20, 'loads past batch_size ran');
is($failures, 0, "async_fdw agrees with the local table on $nunits random units of writes (seed $seed)");

done_testing();
