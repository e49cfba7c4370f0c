# idem_webhook_verify and idem_wechatpay_decrypt do not leak: in one
# backend, after a warm-up, 100,000 calls over every kind of key (an HMAC,
# Ed25519, RSA over a form, RSA with a platform certificate, RSA with a
# certificate chain, with one the request carries, AES-256-GCM), a valid and
# an invalid delivery of each (test/vectors/Deliveries.pm, fresh keys),
# leave the backend's memory where it was: its private resident memory
# (RssAnon) and data segment (VmData) from /proc/self/status, and the total
# of its memory contexts.  A leak of 100 bytes a call would be 10 MB; the
# bound is 1 MB.  Memory, not time, is asserted.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use lib "$FindBin::RealBin/../../vectors";
use IdemTest;
use Deliveries;

# Calls measured, and the most the backend may grow over them
my $CALLS = 100_000;
my $BOUND_KB = 1024;

# On a server built with AddressSanitizer, freed memory waits in its
# quarantine (256 MB) before it is reused, which would read as growth here:
# this node's backends run without one, so that what is freed is reused as
# with the usual allocator, and memory still kept is still seen.
$ENV{ASAN_OPTIONS} = join(':', $ENV{ASAN_OPTIONS} // (), 'quarantine_size_mb=0')
  if `pg_config --cflags` =~ /-fsanitize=\S*address/;
my $node = idem_node('verify_memory', "log_statement = none\n");
$node->safe_psql('postgres', 'CREATE EXTENSION idem');
my @deliveries = Deliveries::make($node->basedir . '/keys',
	"$FindBin::RealBin/../../regress/sql/webhook_wechatpay.sql");
$node->safe_psql('postgres', Deliveries::sql(@deliveries));
my $kinds = $node->safe_psql('postgres',
	'SELECT string_agg(DISTINCT kind, \' \' ORDER BY kind) FROM deliveries');
is($kinds, 'decrypt ed25519 hmac rsa_cert rsa_chain rsa_form rsa_paypal', 'a delivery of every kind');

# calls(n): n calls, the deliveries in turn (every one checked to give the
# answer it should); the backend's memory in kB: RssAnon, VmData, VmRSS, and
# the total of its memory contexts
$node->safe_psql('postgres', q{
CREATE FUNCTION calls(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ds deliveries[] := ARRAY(SELECT d FROM deliveries d ORDER BY kind, valid);
    d deliveries;
    ok boolean;
BEGIN
    FOR i IN 0 .. n - 1 LOOP
        d := ds[i % cardinality(ds) + 1];
        IF d.kind = 'decrypt' THEN
            ok := idem_wechatpay_decrypt(d.secret, d.payload::jsonb) IS NOT NULL;
        ELSE
            ok := idem_webhook_verify(d.scheme, d.secret, d.payload, d.headers);
        END IF;
        IF ok IS DISTINCT FROM d.valid THEN
            RAISE EXCEPTION 'call %: % (valid: %) gave %', i, d.kind, d.valid, ok;
        END IF;
    END LOOP;
END $$;
CREATE FUNCTION memory_kb(OUT rss_anon bigint, OUT vm_data bigint, OUT vm_rss bigint,
                          OUT contexts bigint)
LANGUAGE sql AS $$
    SELECT (SELECT substring(s FROM 'RssAnon:\s+(\d+) kB')::bigint),
           (SELECT substring(s FROM 'VmData:\s+(\d+) kB')::bigint),
           (SELECT substring(s FROM 'VmRSS:\s+(\d+) kB')::bigint),
           (SELECT sum(total_bytes)::bigint / 1024 FROM pg_backend_memory_contexts)
    FROM pg_read_file('/proc/self/status') AS s
$$;
});

# One session: a warm-up (every cache and OpenSSL's method store filled),
# the memory, the calls, the memory again
my $out = $node->safe_psql('postgres', qq{
SELECT calls(2400);
SELECT * FROM memory_kb();
SELECT calls($CALLS);
SELECT * FROM memory_kb();
});
my ($before, $after) = grep { /^\d+\|/ } split /\n/, $out;
my %before;
my %after;
@before{qw(rss_anon vm_data vm_rss contexts)} = split /\|/, $before;
@after{qw(rss_anon vm_data vm_rss contexts)} = split /\|/, $after;
note("kB before / after $CALLS calls: "
	  . join(', ', map { "$_ $before{$_} / $after{$_}" } qw(rss_anon vm_data vm_rss contexts)));
for my $what (qw(rss_anon vm_data contexts))
{
	cmp_ok($after{$what} - $before{$what}, '<', $BOUND_KB,
		"$what grows by less than $BOUND_KB kB over $CALLS calls "
		  . "($before{$what} kB before, $after{$what} kB after)");
}

done_testing();
