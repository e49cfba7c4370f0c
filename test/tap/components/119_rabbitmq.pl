# A payment-callback consumer on a real RabbitMQ (examples/queue/consumer.py)
# applies each message in one transaction with idem_webhook and acknowledges
# it after COMMIT.  The broker delivers again what was not acknowledged, and
# the test has it do so every way it can: the consumer killed (SIGKILL)
# between a COMMIT and its ack; the broker stopped and started while a
# committed message waited for its ack; a failed transaction nacked back to
# the queue; and messages published again by hand, as a gateway resends.  In
# the end each message is in the ledger exactly once and none is lost (a
# durable queue, persistent messages and publisher confirms:
# examples/queue/publish.py); a message without a message_id is refused.
use strict;
use warnings;

use DBI;
use File::Path qw(rmtree);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

require_packaged_server('its consumer makes the calls that the regression tests make on this build');

# Debian's /usr/sbin/rabbitmq-server runs the broker only as root or as
# rabbitmq; the scripts it wraps run it as anyone.
my $rabbit_bin = '/usr/lib/rabbitmq/bin';
# the Python that Debian's python3-pika and python3-psycopg are built for
my $python = '/usr/bin/python3';
plan skip_all => 'RabbitMQ is not installed (Debian package rabbitmq-server)'
  unless -x '/usr/sbin/rabbitmq-server' && -x "$rabbit_bin/rabbitmq-server";
plan skip_all => 'pika or psycopg is not installed (Debian packages python3-pika, python3-psycopg)'
  unless system("$python -c 'import pika, psycopg' 2>/dev/null") == 0;

my $QUEUE = 'payments';
my $SOURCE = 'payments-queue';    # the consumer's idem_webhook source
my $N = 200;
my $examples = "$FindBin::RealBin/../../../examples/queue";

my $node = idem_node('rabbitmq');
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION idem;
-- no unique message_id: a message applied twice would be two rows
CREATE TABLE ledger (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                     message_id text NOT NULL, account text NOT NULL,
                     amount numeric NOT NULL, currency text NOT NULL);
CREATE ROLE consumer LOGIN;
GRANT EXECUTE ON FUNCTION idem_webhook(text, text, interval) TO consumer;
GRANT INSERT ON ledger TO consumer;
});

sub sql { return $node->safe_psql('postgres', $_[0]); }

# --- the broker ------------------------------------------------------------------

# A node of its own, which never meets the system's broker or another test's:
# its own name, ports (AMQP, Erlang distribution, epmd, and the distribution
# port of the command line tools), files, configuration and Erlang cookie
# (in HOME), everything on the loopback interface.
my $dir = "${PostgreSQL::Test::Utils::tmp_check}/rabbitmq";
rmtree($dir);
mkdir $dir;
my $amqp_port = PostgreSQL::Test::Cluster::get_free_port();
my $ctl_port = PostgreSQL::Test::Cluster::get_free_port();
my $loopback = '-kernel inet_dist_use_interface {127,0,0,1}';
my %rabbit_env = (
	HOME => $dir,
	RABBITMQ_NODENAME => "idem-test-$$\@localhost",
	RABBITMQ_NODE_IP_ADDRESS => '127.0.0.1',
	RABBITMQ_NODE_PORT => $amqp_port,
	RABBITMQ_DIST_PORT => PostgreSQL::Test::Cluster::get_free_port(),
	RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS => $loopback,
	RABBITMQ_CTL_DIST_PORT_MIN => $ctl_port,
	RABBITMQ_CTL_DIST_PORT_MAX => $ctl_port,
	RABBITMQ_CTL_ERL_ARGS => $loopback,
	ERL_EPMD_PORT => PostgreSQL::Test::Cluster::get_free_port(),
	ERL_EPMD_ADDRESS => '127.0.0.1',
	RABBITMQ_MNESIA_BASE => "$dir/mnesia",
	RABBITMQ_LOG_BASE => "$dir/log",
	RABBITMQ_PID_FILE => "$dir/rabbitmq.pid",
	RABBITMQ_CONF_ENV_FILE => "$dir/rabbitmq-env.conf",
	RABBITMQ_CONFIG_FILE => "$dir/rabbitmq.conf",
	RABBITMQ_ADVANCED_CONFIG_FILE => "$dir/advanced.config",
	RABBITMQ_ENABLED_PLUGINS_FILE => "$dir/enabled_plugins");
append_to_file("$dir/rabbitmq-env.conf", '');
append_to_file("$dir/rabbitmq.conf", "# defaults, not those of /etc/rabbitmq\n");
append_to_file("$dir/enabled_plugins", "[].\n");

# Run RabbitMQ's command line tool on the node; returns its output
sub rabbitmqctl
{
	local %ENV = (%ENV, %rabbit_env);
	my ($out, $err) = ('', '');
	IPC::Run::run([ "$rabbit_bin/rabbitmqctl", @_ ], '<', \undef, '>', \$out, '2>', \$err)
	  or die "rabbitmqctl @_: $out$err";
	return $out;
}

my ($broker, $epmd);

# Start the node and wait until RabbitMQ runs in it (some seconds)
sub start_broker
{
	local %ENV = (%ENV, %rabbit_env);
	$epmd = 1;
	$broker = IPC::Run::start([ "$rabbit_bin/rabbitmq-server" ],
		'<', \undef, '>>', "$dir/server.out", '2>>', "$dir/server.out");
	# the node writes its pid file first, then starts RabbitMQ
	rabbitmqctl('wait', $rabbit_env{RABBITMQ_PID_FILE}, '--timeout', $PostgreSQL::Test::Utils::timeout_default);
	return;
}

# Stop the node: returns once its process has exited
sub stop_broker
{
	rabbitmqctl('shutdown');
	$broker->finish;
	$broker = undef;
	return;
}

# The messages in the queue, ready or delivered and not yet acknowledged
sub queued
{
	my ($n) = rabbitmqctl(qw(list_queues --quiet --no-table-headers name messages)) =~ /^$QUEUE\t(\d+)$/m;
	return $n;
}

# --- the consumer and the publisher -------------------------------------------------

(my $socket_dir = $node->host) =~ s/([^A-Za-z0-9._~-])/sprintf('%%%02X', ord $1)/ge;
my %app_env = (
	AMQP_URL => "amqp://guest:guest\@127.0.0.1:$amqp_port/%2F",
	DATABASE_URL => "postgresql://consumer\@$socket_dir:" . $node->port . '/postgres',
	QUEUE => $QUEUE);
my @consumers;

# Start consumer run $run (1, 2, ...) with %env added to its environment; it
# logs a line per message to $dir/consumer-$run.log
sub start_consumer
{
	my ($run, %env) = @_;
	local %ENV = (%ENV, %app_env, %env);
	my $h = IPC::Run::start([ $python, "$examples/consumer.py" ],
		'<', \undef, '>', "$dir/consumer-$run.log", '2>', "$dir/consumer-$run.err",
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	push @consumers, $h;
	return $h;
}

# What consumer run $run has logged so far
sub consumer_log
{
	my $run = shift;
	return -e "$dir/consumer-$run.log" ? slurp_file("$dir/consumer-$run.log") : '';
}

# Message $i as publish.py reads it: its id, a space, its body
sub message
{
	my $i = shift;
	return sprintf(qq(pay-%03d {"account": "acct_%d", "amount": %d.50, "currency": "CNY"}\n), $i, $i % 7, $i);
}

# Publish the messages with examples/queue/publish.py, which returns once
# the broker has confirmed them all
sub publish
{
	local %ENV = (%ENV, %app_env);
	my $err = '';
	IPC::Run::run([ $python, "$examples/publish.py" ], '<', \join('', @_), '2>', \$err)
	  or die "publish.py: $err";
	return;
}

# Wait until $cond->() is true, at most the test's timeout, and no longer
# than consumer $h runs
sub wait_for
{
	my ($h, $cond) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	until ($cond->())
	{
		return 0 if time > $deadline || !$h->pumpable;
		usleep(100_000);
	}
	return 1;
}

# Stop whatever still runs however the test ends: the consumers, the
# broker, and its epmd (which outlives the node)
END
{
	local $?;
	$_->kill_kill for grep { $_->pumpable } @consumers;
	if ($broker)
	{
		eval { rabbitmqctl('shutdown') };
		$broker->kill_kill;
	}
	local %ENV = (%ENV, %rabbit_env);
	IPC::Run::run([ 'epmd', '-kill' ], '>', \my $out, '2>', \my $err) if $epmd;
}

# --- 1. publish ----------------------------------------------------------------------

start_broker();
like(rabbitmqctl('status'), qr/^Interface: 127\.0\.0\.1, port: $amqp_port, protocol: amqp,/m,
	"the test's own RabbitMQ node runs, on 127.0.0.1:$amqp_port");
# the 200 messages, then pay-010 and pay-020 again: a gateway resent them
publish(map { message($_) } 1 .. $N, 10, 20);
is(queued(), $N + 2, 'publisher: all 202 messages confirmed and in the queue');

# --- 2. the consumer dies between COMMIT and ack --------------------------------------

my $c1 = start_consumer(1, CRASH_AFTER_COMMIT => 50);
$c1->finish;
is($c1->full_result & 127, 9, 'consumer 1 was killed (SIGKILL) after its 50th commit');
my @lines = split /\n/, consumer_log(1);
is($lines[-1], 'pay-050 applied redelivered=0', 'its last commit was pay-050');
is(sql('SELECT count(*) FROM ledger'), 50, 'pay-001 to pay-050 are in the ledger');
is(queued(), $N + 2 - 49,
	'the broker still has pay-050: committed, never acknowledged (and all 151 after it)');

# --- 3. the broker restarts while a committed message waits for its ack --------------

# A transaction that holds pay-120's delivery stops the consumer there: its
# idem_webhook waits for it
my $holder = DBI->connect('dbi:Pg:host=' . $node->host . ';port=' . $node->port . ';dbname=postgres',
	'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0 });
$holder->begin_work;
$holder->do(q{SELECT idem_webhook($1, 'pay-120')}, undef, $SOURCE);

my $c2 = start_consumer(2);
ok( wait_for(
		$c2,
		sub {
			sql(q{SELECT count(*) FROM pg_stat_activity
			      WHERE usename = 'consumer' AND wait_event_type = 'Lock'}) == 1;
		}),
	'consumer 2 waits at pay-120');
like(consumer_log(2), qr/^pay-050 duplicate redelivered=1$/m,
	'pay-050, committed before the kill, came again (redelivered) and was only acknowledged');
my $redelivered = () = consumer_log(2) =~ /redelivered=1$/mg;
note("consumer 2 got $redelivered redelivered messages");
is(sql('SELECT count(*) FROM ledger'), 119, 'the ledger has pay-001 to pay-119');

# Stop the broker; then let pay-120 through: the consumer commits it and
# finds no broker to acknowledge it to
stop_broker();
$holder->rollback;
$holder->disconnect;
$c2->finish;
@lines = split /\n/, consumer_log(2);
is($lines[-1], 'pay-120 applied redelivered=0', 'consumer 2 committed pay-120 with the broker down');
like(slurp_file("$dir/consumer-2.err"), qr/pika\.exceptions\.\w+/,
	'and ended on its ack, with the error of the lost connection');

start_broker();
is(queued(), $N + 2 - 119,
	'after the restart the queue has every message not acknowledged: pay-120 to pay-200 and two resent');

# --- 4. a failed transaction; a message without an id; resends -------------------------

# pay-150's insert fails until the constraint goes
sql(q{ALTER TABLE ledger ADD CONSTRAINT hold_pay_150 CHECK (message_id <> 'pay-150')});
{
	local %ENV = (%ENV, %app_env);
	my $nameless = (split / /, message(201), 2)[1];
	IPC::Run::run(
		[
			$python, '-c', 'import os, sys, pika
c = pika.BlockingConnection(pika.URLParameters(os.environ["AMQP_URL"]))
c.channel().basic_publish("", os.environ["QUEUE"], sys.stdin.read())
c.close()'
		],
		'<', \$nameless) or die 'could not publish the message without an id';
}

my $c3 = start_consumer(3);
ok( wait_for($c3, sub { (() = consumer_log(3) =~ /^pay-150 failed, requeued: 23514 /mg) >= 2 }),
	'pay-150 failed (check violation), was rolled back, nacked, redelivered and failed again');
sql('ALTER TABLE ledger DROP CONSTRAINT hold_pay_150');
ok(wait_for($c3, sub { sql('SELECT count(*) FROM ledger') == $N }),
	'once the failure is gone, consumer 3 applies the rest');
like(consumer_log(3), qr/^pay-150 applied redelivered=1$/m,
	'the redelivered pay-150 was applied: its failed delivery had left no record');
like(consumer_log(3), qr/^pay-120 duplicate redelivered=1$/m,
	'pay-120, committed while the broker was down, came again after the restart and was only acknowledged');
like(consumer_log(3), qr/^rejected: no message_id$/m, 'the message without a message_id was rejected');

# the gateway resends three messages long applied
publish(map { message($_) } 50, 120, 150);
ok( wait_for($c3, sub { (() = consumer_log(3) =~ /^pay-(050|120|150) duplicate redelivered=0$/mg) == 3 }),
	'the resent pay-050, pay-120 and pay-150 are duplicates, acknowledged and not applied');
ok(wait_for($c3, sub { queued() == 0 }),
	'the queue is empty: everything acknowledged, the message without an id dropped');
$c3->signal('TERM');
$c3->finish;

# --- 5. the ledger ------------------------------------------------------------------------

is(sql(q{SELECT count(*) || ' ' || count(DISTINCT message_id) || ' ' || sum(amount) FROM ledger}),
	"$N $N 20200.00", 'the ledger: 200 rows, one per message, and the sum of the 200 amounts (1.50 + ... + 200.50)');
is( sql(qq{SELECT count(*) FROM generate_series(1, $N) i
           WHERE NOT EXISTS (SELECT FROM ledger WHERE message_id = format('pay-%s', lpad(i::text, 3, '0')))}),
	0, 'no message is missing');
is( sql(qq{SELECT count(*) || ' ' || count(*) FILTER (WHERE event_id IN (SELECT message_id FROM ledger))
           FROM idem.webhooks WHERE source = '$SOURCE'}),
	"$N $N", 'idem.webhooks: one record per message id');
my $log = join('', map { consumer_log($_) } 1 .. 3);
is(scalar(() = $log =~ / applied /g), $N, 'the consumers applied 200 messages in all');
is(scalar(() = $log =~ / duplicate /g), 7,
	'and found 7 duplicates: 2 redelivered after the kill and the restart, 5 resent');

stop_broker();
$node->stop;
done_testing();
