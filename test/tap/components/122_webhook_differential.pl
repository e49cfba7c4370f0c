# Every signature scheme of idem_webhook_verify against an implementation
# that shares nothing with idem: test/differential/sign.py signs a few
# hundred random deliveries per scheme with Python's cryptography package,
# as each gateway describes its scheme (HMACs; Ed25519; RSA with fresh
# keys, a certificate chain for UnionPay, platform certificates and a public
# key for WeChat Pay), and makes one-bit mutants of each: in the body, the
# signature, the signed timestamp, a header's name, the other header values
# the check reads.  idem must accept every genuine delivery and refuse every
# mutant, through idem_webhook_verify with the scheme and secret, and
# through idem_webhook_receive with a source (which must also find the
# event id the gateway meant, and give "signature" as the reason of every
# refusal).  The cases are loaded with COPY and checked in one statement.
#
# IDEM_WEBHOOK_SEED (default 24) replays a run: the same HMAC secrets,
# bodies and header names, and the same bits flipped in them (RSA and
# Ed25519 keys are new every run, timestamps come from the clock, so
# signatures differ); IDEM_WEBHOOK_CASES (default 300) is the number of
# genuine deliveries per scheme.  The cases, the sources with their secrets
# and any failures are left in the node's directory (differential/).
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

# the Python that Debian's python3-cryptography is built for
my $python = '/usr/bin/python3';
plan skip_all => 'Python 3 with the cryptography package is not installed (Debian package python3-cryptography)'
  unless system("$python -c 'import cryptography' 2>/dev/null") == 0;

my $seed = ($ENV{IDEM_WEBHOOK_SEED} // '') ne '' ? $ENV{IDEM_WEBHOOK_SEED} : 24;
my $count = ($ENV{IDEM_WEBHOOK_CASES} // '') ne '' ? $ENV{IDEM_WEBHOOK_CASES} : 300;
die "IDEM_WEBHOOK_SEED and IDEM_WEBHOOK_CASES are whole numbers\n"
  unless $seed =~ /^\d+$/ && $count =~ /^\d+$/ && $count > 0;

# The mutants each scheme must have: where a one-bit change must be refused
my %kinds = (
	stripe => 'body header signature timestamp',
	standard => 'body field header signature timestamp',
	svix => 'body field header signature timestamp',
	github => 'body header signature',
	shopify => 'body header signature',
	razorpay => 'body header signature',
	checkout => 'body header signature',
	paddle => 'body header signature timestamp',
	adyen => 'body signature',
	adyen_platform => 'body header signature',
	square => 'body header signature',
	paystack => 'body header signature',
	airwallex => 'body header signature timestamp',
	alipay => 'body signature',
	alipay_v3 => 'body field header signature timestamp',
	antom => 'body field header signature',
	unionpay => 'body signature',
	wechatpay => 'body field header signature timestamp',
	paypal => 'body field header signature timestamp',
	# the body but data.id is not signed: only data.id's bytes are mutated
	mercadopago => 'body field header signature timestamp');

my $node = idem_node('webhook_differential', "log_statement = none\n",
	extra => [ '--encoding=UTF8', '--no-locale' ]);
$node->safe_psql('postgres', 'CREATE EXTENSION idem');
my $dir = $node->basedir . '/differential';
mkdir $dir or die "$dir: $!";

# --- the deliveries, signed outside idem ---------------------------------------

my $t0 = time;
my ($out, $err) = ('', '');
my $signed = IPC::Run::run([ $python, "$FindBin::RealBin/../../differential/sign.py", $seed, $count, $dir ],
	'<', \undef, '>', \$out, '2>', \$err);
ok($signed, "deliveries signed by Python's cryptography, seed $seed (IDEM_WEBHOOK_SEED), $count a scheme")
  or BAIL_OUT("sign.py failed: $err");
note($out);
my $t_sign = time - $t0;

# every scheme idem knows, from the hint of an unknown one
my (undef, undef, $hint) = $node->psql('postgres', q{SELECT idem_webhook_verify('?', 'x', '', '{}')});
my @registry = $hint =~ /HINT:\s+The schemes are (.*)\./ ? ($1 =~ /"([^"]+)"/g) : ();
is(join(' ', sort @registry), join(' ', sort keys %kinds), 'every scheme of the registry is checked here');

# --- one statement: each case through idem_webhook_verify and _receive ------

$t0 = time;
$node->safe_psql('postgres', qq{
CREATE TABLE sources (source text PRIMARY KEY, scheme text NOT NULL, secret text NOT NULL);
CREATE TABLE cases (id int PRIMARY KEY, source text NOT NULL REFERENCES sources, kind text NOT NULL,
                    payload text NOT NULL, headers jsonb NOT NULL, expect boolean NOT NULL,
                    event_id text, what text NOT NULL);
COPY sources FROM '$dir/sources.tsv' (ENCODING 'UTF8');
COPY cases FROM '$dir/cases.tsv' (ENCODING 'UTF8');
SELECT count(idem_webhook_source_set(source, scheme, ARRAY[secret])) FROM sources;
});
my $t_load = time - $t0;
$t0 = time;
$node->safe_psql('postgres', q{
CREATE TABLE outcomes AS
SELECT c.id, idem_webhook_verify(s.scheme, s.secret, c.payload, c.headers) AS verified,
       r.status, r.event_id, r.reason
FROM cases c JOIN sources s USING (source)
CROSS JOIN LATERAL idem_webhook_receive(c.source, c.payload, c.headers) AS r;
});
my $t_check = time - $t0;
note(sprintf('sign.py %.1f s, loading %.1f s, %s %.1f s', $t_sign, $t_load,
	'idem_webhook_verify and idem_webhook_receive over every case', $t_check));

# --- the verdicts -------------------------------------------------------------------

# What each case should have given: verify its expectation; receive "new"
# under the event id for a genuine delivery (rejected as malformed when the
# gateway's description gives it none), and rejected for its signature for
# every mutant
my $judged = q{
SELECT s.scheme, c.id, c.kind, c.what, c.event_id AS want_id, o.verified, o.status, o.reason,
       o.event_id AS got_id,
       o.verified IS DISTINCT FROM c.expect AS verify_wrong,
       NOT coalesce(CASE WHEN c.expect AND c.event_id IS NOT NULL
                         THEN o.status = 'new' AND o.event_id = c.event_id
                         WHEN c.expect THEN o.status = 'rejected' AND o.reason = 'malformed'
                         ELSE o.status = 'rejected' AND o.reason = 'signature' END, false)
           AS receive_wrong
FROM cases c JOIN sources s USING (source) JOIN outcomes o USING (id)
};
my $summary = $node->safe_psql('postgres', qq{
WITH judged AS ($judged),
kinds AS (
    SELECT scheme, string_agg(kind || ' ' || n, ', ' ORDER BY kind) AS mutants
    FROM (SELECT scheme, kind, count(*) AS n FROM judged WHERE kind <> 'genuine' GROUP BY 1, 2) k
    GROUP BY scheme)
SELECT format(E'%s\\t%s\\t%s\\t%s\\t%s\\t%s', j.scheme,
              count(*) FILTER (WHERE kind = 'genuine'), k.mutants,
              count(*) FILTER (WHERE verify_wrong), count(*) FILTER (WHERE receive_wrong),
              array_to_string((array_agg(format('case %s (%s): verify %s, receive %s/%s %s (event id %s)',
                                                id, what, verified, status, reason, to_json(got_id),
                                                to_json(want_id)) ORDER BY id)
                               FILTER (WHERE verify_wrong OR receive_wrong))[1:3], ' ;; '))
FROM judged j JOIN kinds k USING (scheme)
GROUP BY j.scheme, k.mutants ORDER BY j.scheme
});

my %row;
for my $line (split /\n/, $summary)
{
	my ($scheme, @rest) = split /\t/, $line, -1;
	$row{$scheme} = \@rest;
}

# each scheme has its genuine deliveries, and mutants of every kind it
# should have, most found (a body may be empty, a header name only change
# in case)
my @short;
for my $scheme (sort keys %kinds)
{
	my ($genuine, $mutants) = @{ $row{$scheme} // [ 0, '' ] };
	my %n = map { split / / } split /, /, $mutants;
	push @short, $scheme
	  if $genuine != $count
	  || join(' ', sort keys %n) ne $kinds{$scheme}
	  || grep { $_ < 0.9 * $count - 2 } values %n;
}
is("@short", '', "every scheme has $count genuine deliveries and mutants of each kind it signs");

my $failed = 0;
for my $scheme (sort keys %kinds)
{
	my ($genuine, $mutants, $verify_wrong, $receive_wrong, $failures) =
	  @{ $row{$scheme} // [ 0, 'none', -1, -1, '' ] };
	is($verify_wrong, 0,
		"$scheme: idem_webhook_verify accepts the $genuine genuine deliveries, refuses the mutants ($mutants)");
	is($receive_wrong, 0,
		"$scheme: idem_webhook_receive records each genuine delivery under its event id, rejects each mutant for its signature"
	);
	diag("$scheme, the first failures: $failures") if $verify_wrong || $receive_wrong;
	$failed ||= $verify_wrong || $receive_wrong;
}
if ($failed)
{
	$node->safe_psql('postgres', qq{
COPY (SELECT j.*, c.payload, c.headers, s.secret
      FROM ($judged) j JOIN cases c USING (id) JOIN sources s ON s.source = c.source
      WHERE verify_wrong OR receive_wrong ORDER BY id)
TO '$dir/failures.tsv'});
	diag("the failed cases, with their payloads, headers and secrets: $dir/failures.tsv; replay with IDEM_WEBHOOK_SEED=$seed");
}

ok(!$node->log_contains('TRAP:|terminated by signal'), 'no assertion failed, no backend crashed');
$node->stop;
done_testing();
