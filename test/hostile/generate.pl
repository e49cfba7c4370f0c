#!/usr/bin/perl
# Generate the cases of the hostile-input sweep as SQL that fills
# hostile.cases (test/hostile/driver.sql creates it).  The same seed gives
# the same cases.
#
#   perl test/hostile/generate.pl [--seed N] [--quick] > cases.sql
#
# --quick leaves out the cases of several megabytes (for slow runs, such as
# under valgrind).  Each case is one SQL statement returning one value, with
# what it must give: ok, ok:<value>, err:<SQLSTATE>, err or any (see
# driver.sql).  Families: text (keys, scopes, sources, event ids, phases and
# order ids of random code points, around the byte limits), json (random,
# deep, wide and huge documents, and responses around
# idem.max_response_size), signature (every malformed header shape, valid
# signatures as controls), payment (currencies, amounts, dates), interval
# (leases, ttls, tolerances, ends at the edge of timestamptz's range),
# token, fingerprint, key, forms (the alipay and unionpay schemes), and
# wechatpay (certificates, PEM, headers and resources of WeChat Pay).  The NULL sweep
# is generated from pg_proc by driver.sql.
use strict;
use warnings;
use utf8;

use Digest::SHA qw(hmac_sha256_hex hmac_sha256_base64);
use Encode qw(encode_utf8);
use File::Basename qw(dirname);
use Getopt::Long;

my $seed = 20240601;
my $quick = 0;
GetOptions('seed=i' => \$seed, 'quick' => \$quick) or die "usage: $0 [--seed N] [--quick]\n";
srand($seed);

my $id = 0;
my $family = '';
my @out;

# A SQL string literal (standard_conforming_strings is on)
sub lit
{
	my $s = shift;
	$s =~ s/'/''/g;
	return "'$s'";
}

# Add a case: the statement, what it must give, and an optional setup
sub add
{
	my ($sql, $expect, $setup) = @_;
	$id++;
	push @out,
	  sprintf("INSERT INTO hostile.cases VALUES (%d, %s, %s, %s, %s);",
		$id, lit($family), defined $setup ? lit($setup) : 'NULL',
		lit($sql), lit($expect));
	return;
}

# Bytes of a Perl string in UTF-8
sub bytes { return length(encode_utf8($_[0])); }

# A random code point whose UTF-8 form takes $w bytes (never NUL, never a
# surrogate: the server's text holds neither)
sub rand_char
{
	my $w = shift;
	my $cp;
	if ($w == 1)
	{
		# printable ASCII, with quotes, backslashes, % and controls
		my @special = (1, 9, 10, 13, 27, 34, 37, 39, 92, 127);
		$cp = rand() < 0.3 ? $special[ int(rand(@special)) ] : 32 + int(rand(95));
	}
	elsif ($w == 2) { $cp = 0x80 + int(rand(0x800 - 0x80)); }
	elsif ($w == 3)
	{
		do { $cp = 0x800 + int(rand(0x10000 - 0x800)); }
		  while ($cp >= 0xD800 && $cp <= 0xDFFF);
		# now and then a noncharacter
		$cp = (0xFDD0, 0xFFFE, 0xFFFF)[ int(rand(3)) ] if rand() < 0.1;
	}
	else { $cp = 0x10000 + int(rand(0x110000 - 0x10000)); }
	return chr($cp);
}

# Random text of exactly $n bytes: random widths, the last characters
# chosen so that the total lands on $n
sub rand_text
{
	my $n = shift;
	my $s = '';
	my $left = $n;
	while ($left > 0)
	{
		my $w = 1 + int(rand(4));
		$w = $left if $w > $left;
		$s .= rand_char($w);
		$left -= $w;
	}
	return $s;
}

# $n - $w bytes of ASCII then one character of $w bytes: a multibyte
# character straddling (or ending at) the limit
sub straddle
{
	my ($n, $w) = @_;
	return ('k' x ($n - $w)) . rand_char($w);
}

# The byte lengths to try around each limit
my @lengths = (1, 2, 3, 4, 127, 128, 253, 254, 255, 256, 257, 300, 1000);

# --- text: keys, scopes, sources, event ids, phases, order ids ---

$family = 'text';
{
	my @texts;
	push @texts, '';
	for my $n (@lengths)
	{
		push @texts, rand_text($n) for 1 .. 3;
		push @texts, straddle($n, $_) for grep { $_ <= $n } (2, 3, 4);
	}
	for my $t (@texts)
	{
		my $b = bytes($t);
		my $l = lit($t);
		# key and event id: 1 to 255 bytes
		my $key_expect = $b == 0 ? 'err:22023' : $b > 255 ? 'err:22001' : 'ok';
		# scope and source: at most 255 bytes, may be empty
		my $scope_expect = $b > 255 ? 'err:22001' : 'ok';
		add("SELECT idem_claim($l, lease => '1 min')::text", $key_expect);
		add("SELECT idem_claim('text-scope', scope => $l)::text", $scope_expect);
		add("SELECT (SELECT array_agg(l)::text FROM idem_lookup($l) l)", $key_expect);
		add("SELECT idem_webhook('text-source', $l)::text", $key_expect);
		add("SELECT idem_webhook($l, 'text-event')::text", $scope_expect);
		# a key checked before the (absent) claim is looked for
		add("SELECT idem_complete($l, '{}', scope => 'text-none')::text",
			$key_expect eq 'ok' ? 'err:ID002' : $key_expect);
		add("SELECT idem_fail($l, NULL, scope => 'text-none')::text",
			$key_expect eq 'ok' ? 'err:ID002' : $key_expect);
		add("SELECT idem_checkpoint('text-none', $l)::text",
			$key_expect eq 'ok' ? 'err:ID002' : $key_expect);
		# an HTTP claim answers a key it cannot take with 400, no error
		add("SELECT (idem_http_claim($l, scope => 'text-http', lease => '1 min')).status",
			$key_expect eq 'ok' ? 'ok:claimed' : 'ok:bad_key');
		add("SELECT idem_http_respond($l, 201, '{}', scope => 'text-none')::text",
			$key_expect eq 'ok' ? 'err:ID002' : $key_expect);
		# keys and payment keys take any text as parts
		add("SELECT length(idem_key($l, $l))::text", 'ok:64');
		my $chars = length($t);
		add("SELECT idem_payment_key('m-1', $l, 10, 'USD', '2024-01-01')::text",
			$chars == 0 ? 'err:22023' : $chars > 64 ? 'err:22001' : 'ok');
		add("SELECT idem_payment_key($l, 'order-1', 10, 'USD', '2024-01-01')::text",
			$key_expect);
		# the same text as a JSON string keeps its fingerprint rules
		add("SELECT (idem_canonical(to_jsonb(${l}::text))::jsonb = to_jsonb(${l}::text))::text",
			'ok:true');
	}
}

# --- json: canonical form and fingerprints of hostile documents ---

$family = 'json';

# A random JSON number, in one of many spellings
sub rand_number
{
	my @forms = (
		sub { int(rand(1000)) - 500 },
		sub { sprintf('%.*f', int(rand(20)), rand(1000) - 500) },
		sub { (int(rand(9)) + 1) . 'e' . (int(rand(2000)) - 1000) },
		sub { '-0' },
		sub { '0.0' . ('0' x int(rand(30))) },
		sub { '1' . ('0' x int(rand(300))) },
		sub { '-' . (int(rand(9)) + 1) . '.' . ('0' x int(rand(20))) . int(rand(10)) . 'E+' . int(rand(50)) },
	);
	return $forms[ int(rand(@forms)) ]->();
}

# A random JSON string literal, with escapes of every kind
sub rand_json_string
{
	my $s = '"';
	for (1 .. int(rand(12)))
	{
		my $r = rand();
		if ($r < 0.15) { $s .= ('\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t')[ int(rand(8)) ]; }
		elsif ($r < 0.25) { $s .= sprintf('\\u%04x', 1 + int(rand(0xD7FF))); }
		elsif ($r < 0.3) { $s .= '\\ud83d\\ude00'; }    # a surrogate pair
		else
		{
			my $c = rand_char(1 + int(rand(4)));
			$c = 'x' if ord($c) < 32 || $c eq '"' || $c eq '\\';
			$s .= $c;
		}
	}
	return $s . '"';
}

# A random JSON document of at most $depth levels
sub rand_json
{
	my $depth = shift;
	my $r = rand();
	if ($depth <= 0 || $r < 0.3)
	{
		my $s = rand();
		return rand_number() if $s < 0.4;
		return rand_json_string() if $s < 0.8;
		return ('true', 'false', 'null')[ int(rand(3)) ];
	}
	if ($r < 0.65)
	{
		return '[' . join(',', map { rand_json($depth - 1) } 1 .. int(rand(5))) . ']';
	}
	return '{'
	  . join(',', map { rand_json_string() . ':' . rand_json($depth - 1) } 1 .. int(rand(5)))
	  . '}';
}

# canonical text parses back to the same jsonb, and the fingerprint is the
# SHA-256 of that text
sub json_property
{
	my $j = shift;
	return "SELECT (idem_canonical(j)::jsonb = j AND "
	  . "idem_fingerprint(j) = sha256(convert_to(idem_canonical(j), 'UTF8')))::text "
	  . "FROM (SELECT $j AS j) s";
}

add(json_property(lit(rand_json(6)) . '::jsonb'), 'ok:true') for 1 .. 300;

# deep: 10000 levels of arrays and of objects (already canonical)
for my $n (1000, 10000)
{
	my $arr = "(repeat('[', $n) || repeat(']', $n))";
	my $obj = "(repeat('{\"a\":', $n) || '1' || repeat('}', $n))";
	add("SELECT (idem_canonical(${arr}::jsonb) = $arr)::text", 'ok:true');
	add("SELECT (idem_canonical(${obj}::jsonb) = $obj)::text", 'ok:true');
	add(json_property("${obj}::jsonb"), 'ok:true');
	add("SELECT length(idem_fingerprint(${arr}::jsonb))::text", 'ok:32');
}
# deeper than the server's JSON parser goes: its own error, or a result
add("SELECT length(idem_canonical((repeat('[', 200000) || repeat(']', 200000))::jsonb))::text", 'any');

# jsonb refuses these itself, before idem sees them
add(q{SELECT idem_canonical('"\u0000"'::jsonb)}, 'err:22P05');
add(q[SELECT idem_canonical('{"a":'::jsonb)], 'err:22P02');
add(q{SELECT idem_canonical('NaN'::jsonb)}, 'err:22P02');

# wide and huge documents
unless ($quick)
{
	add("SELECT length(idem_canonical(to_jsonb(repeat('x', 5000000))))::text", 'ok:5000002');
	add("SELECT length(idem_canonical(to_jsonb(repeat('é', 2000000))))::text", 'ok:2000002');
	add(json_property("(SELECT jsonb_agg(i) FROM generate_series(1, 200000) i)"), 'ok:true');
	add(json_property("(SELECT jsonb_object_agg('k' || i, i) FROM generate_series(1, 100000) i)"),
		'ok:true');
	add(json_property("(SELECT jsonb_agg(repeat('\"\\', 1000)) FROM generate_series(1, 1000) i)"),
		'ok:true');
}

# responses, errors and checkpoint data around idem.max_response_size (1MB),
# which counts a value's bytes without PostgreSQL's varlena header: a jsonb
# string of n characters is n + 8 bytes
my $limit = 1024 * 1024;
for my $d (-1, 0, 1)
{
	my $n = $limit - 8 + $d;
	my $expect = $d > 0 ? 'err:54000' : 'ok';
	my $k = "size-$id";
	add("SELECT idem_complete('$k', to_jsonb(repeat('x', $n)))::text", $expect,
		"SELECT idem_claim('$k')");
	$k = "size-$id";
	add("SELECT idem_fail('$k', to_jsonb(repeat('x', $n)), retryable => false)::text", $expect,
		"SELECT idem_claim('$k')");
	$k = "size-$id";
	add("SELECT idem_checkpoint('$k', 'p', to_jsonb(repeat('x', $n)))::text", $expect,
		"SELECT idem_claim('$k')");
	# a body of n + 8 characters is n + 8 bytes
	$k = "size-$id";
	add("SELECT idem_http_respond('$k', 201, '\"' || repeat('x', $n + 6) || '\"')::text",
		$expect, "SELECT idem_http_claim('$k', lease => '1 min')");
}
# a multibyte response is measured in bytes
add("SELECT idem_complete('size-mb', to_jsonb(repeat('€', 349600)))::text", 'err:54000',
	"SELECT idem_claim('size-mb')");
# a compressed response is measured at its full size
add("SELECT idem_complete('size-compressed', (SELECT j FROM hostile.blobs WHERE name = 'compressible'))::text",
	'err:54000', "SELECT idem_claim('size-compressed')");
unless ($quick)
{
	add("SELECT idem_complete('size-huge', to_jsonb(repeat('x', 20000000)))::text", 'err:54000',
		"SELECT idem_claim('size-huge')");
}
# deep responses are stored and replayed as they are
add("SELECT (idem_claim('deep-1')).status FROM (SELECT idem_complete('deep-1', (repeat('[', 10000) || repeat(']', 10000))::jsonb)) s",
	'ok:completed', "SELECT idem_claim('deep-1')");

# --- signature: idem_webhook_verify with every malformed header shape ---

$family = 'signature';
{
	my $secret = 'whsec_test_secret';
	my $payload = '{"id": "evt_1", "amount": 100}';
	my $t = '1700000000';
	my $sig = hmac_sha256_hex("$t.$payload", $secret);
	my $pl = lit($payload);

	# The statement verifying headers (a JSON text) in the stripe scheme
	my $stripe = sub {
		my ($headers, $expect, $p) = @_;
		$p //= $pl;
		add("SELECT idem_webhook_verify('stripe', " . lit($secret) . ", $p, "
			  . lit($headers) . "::jsonb, NULL)::text", $expect);
	};
	my $h = sub { return '{"Stripe-Signature": "' . $_[0] . '"}'; };

	$stripe->($h->("t=$t,v1=$sig"), 'ok:true');
	$stripe->('{"STRIPE-SIGNATURE": "' . "t=$t,v1=$sig" . '"}', 'ok:true');
	$stripe->($h->(" t = $t , v1 = $sig "), 'ok:true');
	$stripe->($h->("t=$t,v1=" . uc($sig)), 'ok:true');
	$stripe->($h->("t=$t,v0=abc,v1=" . ('0' x 64) . ",v1=$sig,x=y"), 'ok:true');
	$stripe->($h->("t=$t," . join(',', map { 'v1=' . ('ab' x 32) } 1 .. 500) . ",v1=$sig"),
		'ok:true');
	my @bad = (
		'', ',', '=', ',,,', 't=', 'v1=', "t=$t", "v1=$sig", "t=,v1=$sig",
		"t=$t,v1=", "t=$t,v1=" . substr($sig, 1), "t=$t,v1=${sig}0",
		"t=$t,v1=" . ('g' x 64), "t=abc,v1=$sig", "t=-1,v1=$sig", "t=+$t,v1=$sig",
		"t=1e9,v1=$sig", "t=99999999999999999999,v1=$sig", "t=253402300800,v1=$sig",
		"t=$t,t=$t,v1=$sig", "t=$t;v1=$sig", "t:$t,v1:$sig", "T=$t,V1=$sig",
		"t=$t,v0=$sig", "t=$t,v2=$sig", "t=" . ($t + 1) . ",v1=$sig",
		"t=$t\\tv1=$sig", "t=$t,v1=$sig\\u00e9", "t=\\u0661\\u0662,v1=$sig",
		"t=$t,v1=" . ('a' x 100000), ("t=$t," x 2000) . "v1=$sig");
	$stripe->($h->($_), 'ok:false') for @bad;
	push @bad, rand_text(int(rand(200))) =~ s/["\\\x00-\x1f]/x/gr for 1 .. 20;
	$stripe->($h->($_), 'ok:false') for @bad[ -20 .. -1 ];
	# headers that are not an object of strings, or ambiguous
	$stripe->($_, 'ok:false') for (
		'[]', '"t=1,v1=2"', '1', 'null', 'true', '{}', '{"Stripe-Signature": 1}',
		'{"Stripe-Signature": null}', '{"Stripe-Signature": ["t=' . $t . ',v1=' . $sig . '"]}',
		'{"Stripe-Signature": {"t": "' . $t . '"}}',
		'{"Stripe-Signature": "t=' . $t . ',v1=' . $sig . '", "stripe-signature": "t=' . $t . ',v1=' . $sig . '"}',
		'{"Stripe-Signature ": "t=' . $t . ',v1=' . $sig . '"}',
		'{"Stripe_Signature": "t=' . $t . ',v1=' . $sig . '"}');
	# another payload, and payloads of every size
	$stripe->($h->("t=$t,v1=$sig"), 'ok:false', lit($payload . ' '));
	$stripe->($h->("t=$t,v1=$sig"), 'ok:false', 'NULL');
	for my $n (0, 1, 1000, $quick ? () : 5_000_000)
	{
		my $p = 'a' x $n;
		my $s = hmac_sha256_hex("$t.$p", $secret);
		$stripe->($h->("t=$t,v1=$s"), 'ok:true', "repeat('a', $n)");
	}
	# a timestamp checked against the clock: long ago is refused
	add("SELECT idem_webhook_verify('stripe', " . lit($secret) . ", $pl, "
		  . lit($h->("t=$t,v1=$sig")) . "::jsonb)::text", 'ok:false');

	# Standard Webhooks
	my $raw = 'standard-secret-key';
	my $b64 = 'c3RhbmRhcmQtc2VjcmV0LWtleQ==';
	my $msgid = 'msg_2';
	my $ssig = hmac_sha256_base64("$msgid.$t.$payload", $raw);
	$ssig .= '=' x ((4 - length($ssig) % 4) % 4);
	my $standard = sub {
		my ($headers, $expect, $secret_sql) = @_;
		$secret_sql //= lit("whsec_$b64");
		add("SELECT idem_webhook_verify('standard', $secret_sql, $pl, "
			  . lit($headers) . "::jsonb, NULL)::text", $expect);
	};
	my $sh = sub {
		my ($i, $ts, $sg) = @_;
		return '{"webhook-id": "' . $i . '", "webhook-timestamp": "' . $ts
		  . '", "webhook-signature": "' . $sg . '"}';
	};
	$standard->($sh->($msgid, $t, "v1,$ssig"), 'ok:true');
	$standard->($sh->($msgid, $t, "v1,$ssig"), 'ok:true', lit($b64));
	$standard->($sh->($msgid, $t, "v1a,xyz v1,AAAA  v1,$ssig v2,abc"), 'ok:true');
	$standard->(
		'{"Webhook-Id": "' . $msgid . '", "WEBHOOK-TIMESTAMP": "' . $t
		  . '", "Webhook-Signature": "v1,' . $ssig . '"}', 'ok:true');
	my $tweaked = $ssig;
	substr($tweaked, 42, 1) = substr($tweaked, 42, 1) eq 'A' ? 'B' : 'A';
	$standard->($sh->(@$_), 'ok:false') for (
		[ '', $t, "v1,$ssig" ], [ $msgid, '', "v1,$ssig" ], [ $msgid, 'abc', "v1,$ssig" ],
		[ $msgid, "-$t", "v1,$ssig" ], [ $msgid, $t, '' ], [ $msgid, $t, 'v1,' ],
		[ $msgid, $t, 'v1' ], [ $msgid, $t, ',' ], [ $msgid, $t, "v2,$ssig" ],
		[ $msgid, $t, "v1a,$ssig" ], [ $msgid, $t, 'v1,' . substr($ssig, 0, 43) ],
		[ $msgid, $t, "v1,$tweaked" ], [ $msgid, $t, "v1,$ssig=" ], [ $msgid, $t, "v1;$ssig" ],
		[ $msgid, $t, 'v1,' . ('A' x 100000) ], [ 'other', $t, "v1,$ssig" ],
		[ $msgid, $t + 1, "v1,$ssig" ], [ $msgid, $t, join(' ', ('v1,AAAA') x 3000) ]);
	$standard->($_, 'ok:false') for (
		'{}', '[]', 'null', '{"webhook-id": "x"}',
		'{"webhook-id": 1, "webhook-timestamp": "' . $t . '", "webhook-signature": "v1,' . $ssig . '"}');
	# the application's configuration errors are errors
	$standard->($sh->($msgid, $t, "v1,$ssig"), 'err:22023', lit('whsec_'));
	$standard->($sh->($msgid, $t, "v1,$ssig"), 'err:22023', lit('whsec_!!!!'));
	$standard->($sh->($msgid, $t, "v1,$ssig"), 'err:22023', lit(''));
	$standard->($sh->($msgid, $t, "v1,$ssig"), 'err:22004', 'NULL');
	$standard->($sh->($msgid, $t, "v1,$ssig"), 'any', lit('whsec_' . rand_text(40)));
	for my $scheme ('', 'Stripe', 'STANDARD', 'hmac', rand_text(10))
	{
		add("SELECT idem_webhook_verify(" . lit($scheme) . ", 's', 'p', '{}')::text", 'err:22023');
	}
	add("SELECT idem_webhook_verify('stripe', 's', 'p', '{}', '-1 microsecond')::text", 'err:22023');
	add("SELECT idem_webhook_verify('stripe', 's', 'p', '{}', '178000000 years')::text", 'ok:false');
}

# --- hmac: the HMAC schemes of version 1.3 (github, shopify, razorpay,
# checkout, paddle, adyen) and of 1.7 (adyen_platform, square) with every malformed
# header, list and item ---

$family = 'hmac';
{
	my $payload = '{"id": "evt_1", "amount": 100}';
	my $pl = lit($payload);
	my $t = '1700000000';

	# A verification of scheme with secret (SQL) over payload (SQL) and
	# headers (a JSON text), with no time check
	my $verify = sub {
		my ($scheme, $secret_sql, $payload_sql, $headers, $expect) = @_;
		add("SELECT idem_webhook_verify(" . lit($scheme) . ", $secret_sql, $payload_sql, "
			  . lit($headers) . "::jsonb, NULL)::text", $expect);
	};
	# A JSON object of one header
	my $h1 = sub { return '{"' . $_[0] . '": "' . $_[1] . '"}'; };
	# The same with the header's value a SQL expression (for the large ones)
	my $verify_sql = sub {
		my ($scheme, $secret_sql, $name, $value_sql, $expect) = @_;
		add("SELECT idem_webhook_verify(" . lit($scheme) . ", $secret_sql, $pl, "
			  . "jsonb_build_object(" . lit($name) . ", $value_sql), NULL)::text", $expect);
	};

	# GitHub, Shopify, Razorpay, Checkout.com, Adyen's platform webhooks:
	# one header, MAC of the body; the secret, and another one of the scheme
	my $secret = "hmac-secret-\x{e9}t\x{e9}";
	my $hex = hmac_sha256_hex(encode_utf8($payload), encode_utf8($secret));
	my $b64 = hmac_sha256_base64(encode_utf8($payload), encode_utf8($secret)) . '=';
	my $pkey = '3F1A9C0D5E7B2486A1C3E5F7092B4D6F8A0C2E4F6B8D0A1C3E5F7A9B1D3F5E7C';
	my $pb64 = hmac_sha256_base64(encode_utf8($payload), pack('H*', $pkey)) . '=';
	my ($squrl, $sqkey) = ('https://shop.example/webhooks/square', 'Ibxx_5AKakO-3qeNVR61Dw');
	my $sqb64 = hmac_sha256_base64(encode_utf8($squrl . $payload), $sqkey) . '=';
	my @body = (
		[ 'github',   'X-Hub-Signature-256',   "sha256=$hex", $secret, 'other' ],
		[ 'shopify',  'X-Shopify-Hmac-Sha256', $b64, $secret, 'other' ],
		[ 'razorpay', 'X-Razorpay-Signature',  $hex, $secret, 'other' ],
		[ 'checkout', 'Cko-Signature',         $hex, $secret, 'other' ],
		[ 'adyen_platform', 'HmacSignature',   $pb64, $pkey, lc($pkey) =~ tr/0-9/1-90/r ],
		[ 'square', 'X-Square-HmacSha256-Signature', $sqb64, "$squrl $sqkey", "$squrl other" ]);
	for (@body)
	{
		my ($scheme, $name, $good, $secret, $other) = @$_;
		my $s = lit($secret);
		$verify->($scheme, $s, $pl, $h1->($name, $good), 'ok:true');
		$verify->($scheme, $s, $pl, $h1->(uc($name), $good), 'ok:true');
		$verify->($scheme, $s, lit($payload . ' '), $h1->($name, $good), 'ok:false');
		$verify->($scheme, $s, 'NULL', $h1->($name, $good), 'ok:false');
		$verify->($scheme, $s, "''", $h1->($name, $good), 'ok:false');
		$verify->($scheme, lit($other), $pl, $h1->($name, $good), 'ok:false');
		$verify->($scheme, $s, $pl, '{"' . $name . '": "' . $good . '", "' . lc($name) . '": "' . $good . '"}',
			'ok:false');
		$verify->($scheme, $s, $pl, $h1->($name, $_), 'ok:false') for (
			'', ' ', '=', 'sha256=', "sha256=sha256=$hex", "SHA256=$hex", " $good", "$good ",
			"$good,$good", "$good $good", substr($good, 1), substr($good, 0, -1), "${good}0",
			"${good}==", 'g' x 64, '!' x 44, ('A' x 43) . '=', "$good\\n",
			"sha256=\\u0661" . substr($hex, 1), rand_text(64) =~ s/["\\\x00-\x1f]/x/gr);
		$verify_sql->($scheme, $s, $name, $_, 'ok:false') for (
			"'sha256=' || repeat('a', 1000000)", "repeat('a', 1000000)", "repeat('=', 1000000)",
			"(SELECT string_agg(" . lit($good) . ", ',') FROM generate_series(1, 5000))",
			"(SELECT string_agg(" . lit($good) . ", ' ') FROM generate_series(1, 5000))");
		$verify->($scheme, $s, $pl, $_, 'ok:false') for (
			'{}', '[]', 'null', '"' . $good . '"', '{"' . $name . '": null}',
			'{"' . $name . '": ["' . $good . '"]}', '{"' . $name . '": {"v": "' . $good . '"}}');
		# a valid header among ten thousand others
		add("SELECT idem_webhook_verify(" . lit($scheme) . ", $s, $pl, "
			  . "(SELECT jsonb_object_agg('X-Other-' || i, repeat('v', 100)) FROM generate_series(1, 10000) i) || "
			  . lit($h1->($name, $good)) . "::jsonb)::text", 'ok:true');
		add("SELECT idem_webhook_verify(" . lit($scheme) . ", '', 'p', '{}')::text", 'err:22023');
		add("SELECT idem_webhook_verify(" . lit($scheme) . ", NULL, NULL, NULL)::text", 'err:22004');
	}
	# bodies of every size, signed here
	for my $n (0, 1, 1000, $quick ? () : 5_000_000)
	{
		my $sig = hmac_sha256_hex('b' x $n, $secret =~ s/[^\x00-\x7f]//gr);
		$verify->('github', lit($secret =~ s/[^\x00-\x7f]//gr), "repeat('b', $n)",
			$h1->('X-Hub-Signature-256', "sha256=$sig"), 'ok:true');
	}

	# Paddle Billing: ts=<unix>;h1=<hex>[;h1=...] over "<ts>:<body>"
	my $psecret = 'pdl_ntfset_hostile';
	my $ps = lit($psecret);
	my $ph1 = hmac_sha256_hex("$t:$payload", $psecret);
	my $ph = sub { return $h1->('Paddle-Signature', $_[0]); };
	$verify->('paddle', $ps, $pl, $ph->("ts=$t;h1=$ph1"), 'ok:true');
	$verify->('paddle', $ps, $pl, $ph->(" ts = $t ; h1 = " . uc($ph1) . ' '), 'ok:true');
	my $many = sub {
		my ($element, $n) = @_;
		return "(SELECT string_agg(" . lit($element) . ", ';') FROM generate_series(1, $n))";
	};
	$verify_sql->('paddle', $ps, 'Paddle-Signature', "'ts=$t;' || " . $many->('h1=' . ('ab' x 32), 5000)
		  . " || ';h1=$ph1'", 'ok:true');
	$verify_sql->('paddle', $ps, 'Paddle-Signature', "'ts=$t;' || " . $many->('h1=' . ('ab' x 32), 5000),
		'ok:false');
	$verify_sql->('paddle', $ps, 'Paddle-Signature', "'ts=$t;' || " . $many->('h1=zz', 20000) . " || ';h1=$ph1'",
		'ok:true');
	$verify_sql->('paddle', $ps, 'Paddle-Signature', $many->("ts=$t", 5000) . " || ';h1=$ph1'", 'ok:false');
	$verify_sql->('paddle', $ps, 'Paddle-Signature', "'ts=$t;h1=' || repeat('a', 1000000)", 'ok:false');
	$verify_sql->('paddle', $ps, 'Paddle-Signature', "repeat(';', 1000000)", 'ok:false');
	$verify->('paddle', $ps, $pl, $ph->($_), 'ok:false') for (
		'', ';', '=', ';;;', 'ts=', 'h1=', "ts=$t", "h1=$ph1", "ts=;h1=$ph1", "ts=$t;h1=",
		"ts=$t;ts=$t;h1=$ph1", "ts=$t,h1=$ph1", "t=$t;v1=$ph1", "TS=$t;H1=$ph1",
		"ts=-1;h1=$ph1", "ts=+$t;h1=$ph1", "ts=1e9;h1=$ph1", "ts=99999999999999999999;h1=$ph1",
		"ts=253402300800;h1=$ph1", "ts=" . ($t + 1) . ";h1=$ph1", "ts=$t;h1=" . substr($ph1, 1),
		"ts=$t;h1=${ph1}0", "ts=\\u0661\\u0662;h1=$ph1", "ts=$t;h1=$ph1\\u00e9",
		rand_text(100) =~ s/["\\\x00-\x1f]/x/gr);
	$verify->('paddle', $ps, 'NULL', $ph->("ts=$t;h1=$ph1"), 'ok:false');
	add("SELECT idem_webhook_verify('paddle', $ps, $pl, " . lit($ph->("ts=$t;h1=$ph1")) . "::jsonb)::text",
		'ok:false');
	add("SELECT idem_webhook_verify('paddle', $ps, $pl, " . lit($ph->("ts=$t;h1=$ph1"))
		  . "::jsonb, '178000000 years')::text", 'ok:true');
	add("SELECT idem_webhook_verify('paddle', '', NULL, NULL)::text", 'err:22023');

	# Adyen: a NotificationRequestItem signing eight of its fields
	my $akey = '3F1A9C0D5E7B2486A1C3E5F7092B4D6F8A0C2E4F6B8D0A1C3E5F7A9B1D3F5E7C';
	my $ak = lit($akey);
	my @fields = ('8816178914778451', '', 'IdemShop', "order-1:\x{e9}", '2599', 'EUR', 'AUTHORISATION', 'true');
	my $asig = hmac_sha256_base64(encode_utf8(join(':', @fields)), pack('H*', $akey)) . '=';
	my $item = '{"pspReference": "' . $fields[0] . '", "merchantAccountCode": "' . $fields[2]
	  . '", "merchantReference": "' . $fields[3] . '", "amount": {"value": ' . $fields[4]
	  . ', "currency": "' . $fields[5] . '"}, "eventCode": "' . $fields[6] . '", "success": "'
	  . $fields[7] . '", "additionalData": {"hmacSignature": "' . $asig . '"}}';
	my $adyen = sub {
		my ($p_sql, $expect, $key_sql) = @_;
		add("SELECT idem_webhook_verify('adyen', " . ($key_sql // $ak) . ", $p_sql, '{}')::text", $expect);
	};
	my $open = substr($item, 0, -1);    # the item without its closing brace
	$adyen->(lit($item), 'ok:true');
	$adyen->(lit('{"NotificationRequestItem": ' . $item . '}'), 'ok:true');
	$adyen->(lit($item), 'ok:true', lit(lc($akey)));
	$adyen->(lit($item) . '::jsonb::text', 'ok:true');
	$adyen->(lit(qq({"live": "false", "notificationItems": [{"NotificationRequestItem": $item}]})), 'ok:false');
	$adyen->(lit($_), 'ok:false') for (
		'', ' ', '{', '}', '[', ']', '{}', '[]', 'null', 'true', '0', '"x"', '{"a":}', '{"a" 1}',
		substr($item, 0, -1), "$item}", "$item$item", $item =~ s/"/'/gr, $item =~ s/EUR/E\\xUR/r,
		$item =~ s/EUR/E\\u0000R/r, $item =~ s/EUR/E\\ud800R/r, $item =~ s/EUR/E\\u12R/r,
		$item =~ s/2599/NaN/r, $item =~ s/2599/-/r, $item =~ s/2599/01/r,
		$open . ', "pspReference": "x"}', $open . ', "additionalData": {}}',
		'{"NotificationRequestItem": ' . $item . ', "NotificationRequestItem": ' . $item . '}',
		'{"NotificationRequestItem": ' . $item . ', "live": "false"}', "[$item]",
		$item =~ s/"hmacSignature": "/"hmacSignature": "A/r, $item =~ s/=\"\}\}$/"}}/r,
		$item =~ s/"hmacSignature": "[^"]*"/"hmacSignature": 1/r,
		rand_text(200) =~ s/["\\\x00-\x1f]/x/gr);
	# deep, wide and huge: the parser's recursion and memory
	for my $n (64, 65, 1000, 200000)
	{
		$adyen->("left(" . lit($item) . ", -1) || ', \"deep\": ' || repeat('[', $n) || repeat(']', $n) || '}'",
			$n <= 62 ? 'ok:true' : 'ok:false');
		$adyen->("repeat('[', $n) || repeat(']', $n)", 'ok:false');
		$adyen->("repeat('{\"a\":', $n) || '1' || repeat('}', $n)", 'ok:false');
		$adyen->("repeat('{\"a\":', $n)", 'ok:false');
		$adyen->("'{\"r\": \"' || repeat('[{', $n) || '\"}'", 'ok:false');
	}
	$adyen->("left(" . lit($item) . ", -1) || ', \"deep\": ' || repeat('[', 60) || repeat(']', 60) || '}'",
		'ok:true');
	$adyen->("left(" . lit($item) . ", -1) || ', \"r\": \"' || repeat('[{\\\\\\\"', 100000) || '\"}'",
		'ok:true');
	$adyen->("left(" . lit($item) . ", -1) || ', ' || (SELECT string_agg(format('\"k%s\": %s', i, i), ', ') "
		  . "FROM generate_series(1, 100000) i) || '}'", 'ok:true');
	$adyen->("left(" . lit($item) . ", -1) || ', ' || (SELECT string_agg('\"pspReference\": \"x\"', ', ') "
		  . "FROM generate_series(1, 10000) i) || '}'", 'ok:false');
	unless ($quick)
	{
		$adyen->("left(" . lit($item) . ", -1) || ', \"big\": [' || repeat('1,', 2500000) || '1]}'", 'ok:true');
		$adyen->("left(" . lit($item) . ", -1) || ', \"big\": \"' || repeat('x', 5000000) || '\"}'", 'ok:true');
		$adyen->("'[' || repeat('\"\\\\u00e9\",', 1000000) || '0]'", 'ok:false');
	}
	$adyen->("replace(" . lit($item) . ", " . lit($asig) . ", repeat('A', 1000000))", 'ok:false');
	$adyen->(lit(rand_json(6)), 'ok:false') for 1 .. 50;
	# the key is the application's: hex of even length, or an error
	$adyen->(lit($item), 'err:22023', lit($_)) for (
		'A', 'ABC', 'GG', ' ' . $akey, "$akey ", "0x$akey", "whsec_$akey", substr($akey, 1), rand_text(10));
	$adyen->(lit($item), 'err:22004', 'NULL');
	$adyen->('NULL', 'err:22023', lit('xyz'));
	add("SELECT idem_webhook_verify('adyen', $ak, " . lit($item) . ", NULL)::text", 'ok:false');
	add("SELECT idem_webhook_verify('adyen', $ak, NULL, '{}')::text", 'ok:false');
}

# --- payment: idem_payment_key's currencies, amounts and dates ---

$family = 'payment';
{
	my $pk = sub {
		my ($amount, $currency, $date, $expect) = @_;
		$date //= "'2024-01-01'";
		add("SELECT idem_payment_key('m-1', 'o-1', $amount, " . lit($currency) . ", $date)", $expect);
	};
	$pk->('10', $_, undef, 'ok') for ('USD', 'usd', 'uSd', 'EUR', 'JPY', 'KWD', 'CLF');
	$pk->('10', $_, undef, 'err:22023') for (
		'', 'US', 'USDD', 'XAU', 'XTS', 'XXX', 'ÜSD', 'U$D', 'U D', "US\t", 'usd ',
		'Usd' x 300, 'ＵＳＤ', rand_text(9));
	$pk->('10', rand_text(3), undef, 'any');
	# random three-letter codes: an ISO code works, anything else is 22023
	for (1 .. 60)
	{
		my $c = join '', map { chr(65 + int(rand(26))) } 1 .. 3;
		$pk->('10', $c, undef, 'any');
	}
	my %amounts = (
		'0' => 'err:22003', '-1' => 'err:22003', '-0.01' => 'err:22003',
		'0.001' => 'err:22023', '0.01' => 'ok', '0.010000' => 'ok', '1.005' => 'err:22023',
		'999999999.99' => 'ok', '999999999.991' => 'err:22003', '1000000000' => 'err:22003',
		'1e20' => 'err:22003', '1e-1000' => 'err:22023', "'NaN'::numeric" => 'err:22023',
		"'Infinity'::numeric" => 'err:22003', "'-Infinity'::numeric" => 'err:22003',
		'0.1' . ('0' x 500) => 'ok', '0.1' . ('0' x 500) . '1' => 'err:22023');
	$pk->($_, 'USD', undef, $amounts{$_}) for sort keys %amounts;
	$pk->('1.5', 'JPY', undef, 'err:22023');
	$pk->('1.0', 'JPY', undef, 'ok');
	$pk->('1.0001', 'KWD', undef, 'err:22023');
	$pk->('1.001', 'KWD', undef, 'ok');
	$pk->('10', 'USD', "'$_'::date", 'err:22008') for ('infinity', '-infinity', '4713-01-01 BC', '10000-01-01', '5874897-12-31');
	$pk->('10', 'USD', "'$_'::date", 'ok') for ('0001-01-01', '9999-12-31', '2024-02-29');
	# one payment, however it is spelled, has one key
	add("SELECT (idem_payment_key('m', 'o', 100, 'usd', '2024-01-01') = "
		  . "idem_payment_key('m', 'o', 100.000, 'USD', '2024-01-01'))::text", 'ok:true');
	add("SELECT (idem_payment_key('m', 'o', 100, 'USD', '2024-01-01') <> "
		  . "idem_payment_key('m', 'o', 100, 'EUR', '2024-01-01'))::text", 'ok:true');
}

# --- interval: leases, ttls, tolerances, batch sizes ---

$family = 'interval';
{
	# an interval ending at or before now is no lease or ttl
	my %iv = (
		'1 microsecond' => 'ok', '1 second' => 'ok', '100 years' => 'ok',
		'0' => 'err:22023', '-1 microsecond' => 'err:22023', '-1 day' => 'err:22023',
		'-178000000 years' => 'err:22023', '-2147483648 months' => 'err:22023',
		'-2147483648 days -2147483648 months' => 'err:22023',
		'1 month -30 days' => 'err:22023', '1 month -31 days' => 'err:22023',
		# on the calendar a year is at least 365 days: this is 5 or 6 days
		'12 months -360 days' => 'ok',
		'-1 day +24 hours' => 'err:22023',
		# a year is 365 or 366 days, so this ends days before now, whatever
		# the date, although 12 "months" of 30 days would make it positive
		'-12 months +360 days +1 hour' => 'err:22023',
		'-1 month +31 days 1 hour' => 'any',
		'178000000 years' => 'err:22008', '2147483647 months' => 'err:22008',
		'2147483647 days' => 'err:22008', '2147483647 days 2147483647 months' => 'err:22008',
		'9223372036854775807 microseconds' => 'err:22008');
	# the end of timestamptz's range, 294276-12-31 23:59:59.999999 UTC,
	# reached from the case's own transaction start: an end past it is
	# refused (a row holding it could not be restored from a dump), an end
	# before it works.  Durations, days, years and days then hours; these
	# are SQL expressions, the ones above literals.
	my $us_to_end = "((extract(epoch FROM timestamptz '294276-12-31 23:59:59.999999+00')"
	  . " - extract(epoch FROM now())) * 1000000)::bigint";
	my %end = (
		# 50 hours past: the end is 2562047592 hours after 2000-01-01
		"format('%s hours', 2562047592 + 50 - floor(extract(epoch FROM now() - timestamptz '2000-01-01 00:00+00') / 3600)::bigint)::interval"
		  => 'err:22008',
		# one microsecond past, counted from the transaction's start
		"format('%s microseconds', $us_to_end + 1)::interval" => 'err:22008',
		"make_interval(days => date '294277-01-02' - current_date)" => 'err:22008',
		"make_interval(years => 294278 - extract(year FROM now())::integer)" => 'err:22008',
		"make_interval(days => date '294276-12-30' - current_date, hours => 72)" => 'err:22008',
		"make_interval(days => date '294276-12-30' - current_date)" => 'ok',
		"format('%s microseconds', $us_to_end - 86400000000)::interval" => 'ok');

	my @cases = ((map { [ lit($_), $iv{$_} ] } sort keys %iv),
		(map { [ $_, $end{$_} ] } sort keys %end));
	for (@cases)
	{
		my ($l, $e) = @$_;
		add("SELECT idem_claim('iv-lease-$id', lease => $l)::text", $e);
		add("SELECT idem_claim('iv-ttl-$id', ttl => $l)::text", $e);
		add("SELECT idem_webhook('iv', 'iv-$id', ttl => $l)::text", $e);
		add("SELECT idem_checkpoint('iv-cp-$id', 'p', lease => $l)::text", $e eq 'ok' ? 'err:ID002' : $e);
		add("SELECT idem_checkpoint('iv-own-$id', 'p', lease => $l)::text", $e,
			"SELECT idem_claim('iv-own-$id')");
	}
	add("SELECT idem_purge($_)::text", 'err:22023') for (0, -1, -2147483648);
	add("SELECT idem_purge($_)::text", 'ok') for (1, 2147483647);
}

# --- token, fingerprint, key ---

$family = 'token';
for my $t ('-1', '0', '9223372036854775807', '-9223372036854775808')
{
	add("SELECT idem_complete('tok-none', '{}', token => $t)::text", 'err:ID002');
	add("SELECT idem_complete('tok-$id', '{}', token => $t)::text", 'err:ID001',
		"SELECT idem_claim('tok-$id')");
	add("SELECT idem_checkpoint('tok-$id', 'p', token => $t)::text", 'err:ID001',
		"SELECT idem_claim('tok-$id')");
}

$family = 'fingerprint';
for my $n (0, 1, 32, 254, 255, 256, 1000, $quick ? () : 1_000_000)
{
	add("SELECT (idem_claim('fp-$id', decode(repeat('ab', $n), 'hex'))).status",
		$n > 255 ? 'err:22001' : 'ok:claimed');
}

$family = 'key';
add(q{SELECT idem_key(VARIADIC '{}'::text[])}, 'err:22023');
add(q{SELECT idem_key(VARIADIC '{{a},{b}}'::text[])}, 'err:22023');
add(q{SELECT idem_key('a', NULL)}, 'err:22004');
add(q{SELECT (idem_key(VARIADIC '[5:6]={a,b}'::text[]) = idem_key('a', 'b'))::text}, 'ok:true');
add(q{SELECT (idem_key('a|b', 'c') <> idem_key('a', 'b|c'))::text}, 'ok:true');
add(q{SELECT (idem_key('1:a,', '') <> idem_key('1:a,1:,'))::text}, 'ok:true');
add(q{SELECT length(idem_key(VARIADIC array_fill('x'::text, ARRAY[100000])))::text}, 'ok:64');
add("SELECT length(idem_key(repeat('é', 1000000)))::text", 'ok:64') unless $quick;

# --- forms: the alipay and unionpay schemes of idem_webhook_verify ---
#
# Their keys, certificates and signed forms are the vectors of
# test/regress/sql/webhook_forms.sql (test/vectors/make_form_vectors.pl).
# A secret that is not the scheme's key is 22023 however it is broken;
# anything in the request is false (a valid form, true, is the control).

$family = 'forms';
{
	my %v;
	my $vectors = dirname(__FILE__) . '/../regress/sql/webhook_forms.sql';
	open(my $fh, '<:encoding(UTF-8)', $vectors) or die "$vectors: $!";
	while (<$fh>)
	{
		next unless /^\\set (\w+) '(.*)'$/;
		my ($name, $value) = ($1, $2);
		$value =~ s/\\([\\n])/$1 eq 'n' ? "\n" : "\\"/ge;
		$value =~ s/''/'/g;
		$v{$name} = $value;
	}
	close($fh);
	die "no vectors in $vectors" unless $v{alipay_form} && $v{unionpay_form};
	my $up_secret = $v{unionpay_root} . $v{unionpay_middle};

	# The statement verifying payload (SQL) with secret (SQL) in scheme
	my $verify = sub {
		my ($scheme, $secret_sql, $payload_sql, $expect) = @_;
		add("SELECT idem_webhook_verify('$scheme', $secret_sql, $payload_sql, '{}')::text", $expect);
	};
	my $alipay = sub { $verify->('alipay', lit($v{alipay_key}), @_); };
	my $unionpay = sub { $verify->('unionpay', lit($up_secret), @_); };

	# controls
	$alipay->(lit($v{alipay_form}), 'ok:true');
	$alipay->(lit($v{alipay_form_gbk_literal}), 'ok:true');
	$unionpay->(lit($v{unionpay_form}), 'ok:true');
	$unionpay->(lit($v{unionpay_form_odd}), 'ok:true');

	# broken %-escapes, at random places and at the end
	for my $form ($v{alipay_form}, $v{unionpay_form})
	{
		my $scheme = $form eq $v{alipay_form} ? $alipay : $unionpay;
		for (1 .. 15)
		{
			my $at = int(rand(length($form)));
			my $broken = substr($form, 0, $at) . ('%', '%G', '%4', '%%', '%0g')[ int(rand(5)) ]
			  . substr($form, $at);
			$scheme->(lit($broken), 'ok:false');
		}
		$scheme->(lit($form . $_), 'ok:false') for ('%', '%4', '&%', '&=', '&x=%E4%B8');
		# a random character changed: false or, in an unsigned empty parameter, true
		for (1 .. 15)
		{
			my $mutant = $form;
			substr($mutant, int(rand(length($form))), 1) = rand_char(1 + int(rand(3)));
			$scheme->(lit($mutant), 'ok');
		}
		# thousands of parameters, empty pieces, over the limit
		$scheme->(lit($form . join('', map { '&' . rand_text(1 + int(rand(8))) =~ s/[&%]/x/gr . '=' . $_ } 1 .. 3000)),
			'ok:false');
		$scheme->(lit($form) . " || repeat('&', 5000)", 'ok:true');
		$scheme->(lit($form) . " || repeat('&', 100000)", 'ok:false');
		$scheme->(lit($form) . " || (SELECT string_agg('&p' || i || '=', '') FROM generate_series(1, 99999) i)",
			'ok:false');
		$scheme->("(SELECT string_agg('p' || i || '=' || i, '&') FROM generate_series(1, 50000) i)", 'ok:false');
		# huge values, and a huge name
		unless ($quick)
		{
			$scheme->(lit($form) . " || '&big=' || repeat('%41', 2000000)", 'ok:false');
			$scheme->(lit($form) . " || '&' || repeat('n', 3000000) || '=1'", 'ok:false');
			$scheme->("repeat('&', 3000000)", 'ok:false');
		}
		# random text as the whole body
		$scheme->(lit(rand_text(int(rand(300)))), 'ok:false') for 1 .. 10;
	}

	# alipay: sign and sign_type of every shape; charsets
	my ($sign) = $v{alipay_form} =~ /&sign=([^&]*)/;
	for my $bad ('', '=', '%3D%3D', 'AAAA', $sign . $sign, substr($sign, 4), 'A' x 100000,
		$sign =~ s/%2B/+/gr, $sign =~ s/%2F/_/gr, "$sign%0A")
	{
		$alipay->(lit($v{alipay_form} =~ s/&sign=[^&]*/&sign=$bad/r), 'ok:false');
	}
	for my $type ('', 'RSA1', 'RSA256', 'rsa', 'SM2', 'HMAC-SHA256', 'RSA2 ', 'RSA2%00')
	{
		$alipay->(lit($v{alipay_form} =~ s/sign_type=RSA2/sign_type=$type/r), 'ok:false');
	}
	for my $cs ('', 'GB18030', 'big5', 'utf-16', 'x' x 1000, '%FF', 'gbk%00')
	{
		$alipay->(lit($v{alipay_form} =~ s/charset=utf-8/charset=$cs/r), 'ok:false');
	}
	# a GBK form with characters unencoded, some of which GBK lacks
	for (1 .. 10)
	{
		my $text = join('', map { rand_char(1 + int(rand(4))) } 1 .. 8) =~ s/[&%+=\x00]/x/gr;
		$alipay->(lit($v{alipay_form_gbk} =~ s/subject=[^&]*/subject=$text/r), 'ok:false');
	}

	# unionpay: signPubKeyCert of every shape
	my ($cert) = $v{unionpay_form} =~ /signPubKeyCert=([^&]*)/;
	my $pem_b64 = $v{unionpay_signer} =~ s/-----[^\n]*-----\n?//gr =~ s/\n//gr;
	# A PEM block around base64, URL-encoded as in a form
	my $block = sub {
		my ($type, $b64) = @_;
		my $pem = "-----BEGIN $type-----\n" . join("\n", $b64 =~ /(.{1,64})/g) . "\n-----END $type-----\n";
		$pem =~ s/([^A-Za-z0-9.\-*_ ])/sprintf('%%%02X', ord($1))/ge;
		return $pem =~ tr/ /+/r;
	};
	my @certs = (
		'', '%0A', $block->('CERTIFICATE', ''), $block->('CERTIFICATE', 'AAAA'),
		$block->('CERTIFICATE', substr($pem_b64, 0, 400)),
		$block->('CERTIFICATE', $pem_b64 . 'AAAA'),
		$block->('CERTIFICATE', 'A' . $pem_b64),
		$block->('PUBLIC KEY', $pem_b64),
		$block->('X509 CRL', $pem_b64),
		$block->('CERTIFICATE', $pem_b64) x 50,
		$cert . $cert,
		$cert =~ s/CERTIFICATE/CERTIFICAT/gr,
		$cert =~ s/%0A/%0D%0A/gr,
		$cert =~ s/%0A//gr,
		$cert x 500);
	for (1 .. 20)
	{
		# the certificate's base64 with one character changed: a broken
		# DER, another signature, another name or extension
		# (another character than the one there: the same one would leave
		# the certificate as it was)
		my $b64 = $pem_b64;
		my $at = 20 + int(rand(length($b64) - 24));
		my @others = grep { $_ ne substr($b64, $at, 1) } ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '+', '/');
		substr($b64, $at, 1) = $others[ int(rand(@others)) ];
		push @certs, $block->('CERTIFICATE', $b64);
	}
	push @certs, $block->('CERTIFICATE', 'QUFB' x 1_500_000) unless $quick;
	for my $c (@certs)
	{
		$unionpay->(lit($v{unionpay_form} =~ s/signPubKeyCert=[^&]*/signPubKeyCert=$c/r), 'ok:false');
	}
	$unionpay->(lit($v{"unionpay_form_$_"}), 'ok:false')
	  for qw(odd_critical by_signer expired future self_signed other_root);
	for my $bad ('', 'AAAA', 'A' x 100000, '%3D')
	{
		$unionpay->(lit($v{unionpay_form} =~ s/signature=[^&]*/signature=$bad/r), 'ok:false');
	}

	# the secret side: malformed and huge PEM is 22023, never an internal error
	my $key_b64 = $v{alipay_key} =~ s/-----[^\n]*-----\n?//gr =~ s/\n//gr;
	my $pem = sub {
		my ($type, $b64) = @_;
		return "-----BEGIN $type-----\n" . join("\n", $b64 =~ /(.{1,64})/g) . "\n-----END $type-----\n";
	};
	my @bad_secrets = (
		'x', '-----BEGIN PUBLIC KEY-----', "-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n",
		"-----END PUBLIC KEY-----\n$key_b64\n", $pem->('PUBLIC KEY', substr($key_b64, 0, 100)),
		$pem->('PUBLIC KEY', $key_b64 . 'AAAA'), $pem->('PUBLIC KEY', "!$key_b64"),
		$pem->('PUBLIC KEY', $pem_b64), $pem->('CERTIFICATE', $key_b64),
		$pem->('PRIVATE KEY', $key_b64), $pem->('RSA PUBLIC KEY', $key_b64),
		"-----BEGIN PUBLIC KEY-----\n" . $pem->('PUBLIC KEY', $key_b64),
		$pem->('PUBLIC KEY', $key_b64) . "-----BEGIN PUBLIC KEY-----\nAAAA\n",
		"-----BEGIN PUBLIC KEY-----\n" x 10000, rand_text(500), substr($key_b64, 1),
		$key_b64 . '=', $key_b64 =~ tr/+\//-_/r);
	push @bad_secrets, $pem->('PUBLIC KEY', 'QUFB' x 1_500_000), $pem->('CERTIFICATE', 'QUFB' x 1_500_000),
	  'A' x 4_000_000
	  unless $quick;
	for my $s (@bad_secrets)
	{
		# the same text as both schemes' secret, the request valid or NULL
		$verify->('alipay', lit($s), lit($v{alipay_form}), 'err:22023');
		$verify->('alipay', lit($s), 'NULL', 'err:22023');
		$verify->('unionpay', lit($s), lit($v{unionpay_form}), 'err:22023');
	}
	# many keys or certificates at once: any one, no limit
	$verify->('alipay', lit($v{alipay_key_other} x 300 . $v{alipay_key}), lit($v{alipay_form}), 'ok:true');
	$verify->('unionpay', lit($up_secret x 300), lit($v{unionpay_form}), 'ok:true');
	$verify->('unionpay', lit($v{unionpay_other_root} x 300), lit($v{unionpay_form}), 'ok:false');
}

# --- wechatpay: the "wechatpay" scheme and idem_wechatpay_decrypt ---
#
# Controls are the notification published in WeChat Pay's Go SDK
# (wechatpay-apiv3/wechatpay-go, core/notify/notify_test.go) and a resource
# of test/vectors/make_wechatpay_vectors.py.  Certificates are rebuilt here
# around the published one's public key, with odd serials and extensions:
# idem does not check a certificate's own signature, so they verify the
# published notification like the original.  The secret's defects are
# 22023; the request's are false or NULL.

$family = 'wechatpay';
{
	my $go_cert = join("\n",
		'-----BEGIN CERTIFICATE-----',
		'MIIDVzCCAj+gAwIBAgIJANfOWdH1ItcBMA0GCSqGSIb3DQEBCwUAMEIxCzAJBgNV',
		'BAYTAlhYMRUwEwYDVQQHDAxEZWZhdWx0IENpdHkxHDAaBgNVBAoME0RlZmF1bHQg',
		'Q29tcGFueSBMdGQwHhcNMjEwNDI3MDg1NTIzWhcNMzEwNDI1MDg1NTIzWjBCMQsw',
		'CQYDVQQGEwJYWDEVMBMGA1UEBwwMRGVmYXVsdCBDaXR5MRwwGgYDVQQKDBNEZWZh',
		'dWx0IENvbXBhbnkgTHRkMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA',
		'2VCTd91fnUn73Xy9DLvt/V62TVxRTEEstVdeRaZ3B3leO0pldE806mXO4RwdHXag',
		'HQ4vGeZN0yqm++rDsGK+U3AH7kejyD2pXshNP9Cq5YwbptiLGtjcquw4HNxJQUOm',
		'DeJf2vg6byms9RUipiq4SzbJKqJFlUpbuIPDpSpWz10PYmyCNeDGUUK65E5h2B83',
		'4uxl1zNLYQCrkdBzb8oUxwYeP5a2DNxmjL5lsJML7DGr5znsevnoqGRwTm9fxCGf',
		'y8wus7hwKz6clt3Whmmda7UAdb1c08hEQFVRbF14AR73xbnd8N0obCWJPCbzMCtk',
		'aSef4FdEEgEXJiw0VAJT8wIDAQABo1AwTjAdBgNVHQ4EFgQUT1c7nd/SUO76HSoZ',
		'umNUJv1R5PwwHwYDVR0jBBgwFoAUT1c7nd/SUO76HSoZumNUJv1R5PwwDAYDVR0T',
		'BAUwAwEB/zANBgkqhkiG9w0BAQsFAAOCAQEAfTjxKRQMzNB/U6ZoCUS+BSNfa2Oh',
		'0plMN6ZuzwiVVZwg1jywvv5yv04koS7Pd4i9E4gt9ZBUQXlpq+A3oOCEEHNRR6b2',
		'kyazGRM7s0OP5X21WrbpSmKmU6K7hkfx30yYs08LVs/Q8DIhvaj1FCFeJzUCzYn/',
		'fHMq4tsbKO0dKAeydPM/nrUZBmaYQVKMVOORGLFjFKVO7JV6Kq/R86ouhjEPgJOe',
		'2xulNBUcjicqtZlBdEh/PWCYP2SpGVDclKm8jeo175T3EVAkdKzzmfpxtMmnMlmq',
		'cTJOU9TxuGvNASMtjj7pYIerTx+xgZDXEVBWFW9PjJ0TV06tCRsgSHItgg==',
		'-----END CERTIFICATE-----', '');
	my $go_serial = 'D7CE59D1F522D701';
	my $go_ts = '1624523846';
	my $go_nonce = 'EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz';
	my $go_sig = 'tJHIiIS9eB2hAYstmAmbbD3ZE5LiIm/Ug5tuL4fC0YOFRWIHV39UFIZXC0e9Wl6lBu6sKvkqDkzpqzBsVHyXF'
	  . 'lbYZTOQrVdG4b6LfTnK4mikv9++ixJMd3vTf2yCqvBkh98zs3Ds5zsYQakzbcwhmw4fMJs4nPLws28H0UW9FjDR//rxELLwXvV1VEA1I'
	  . 'BLX70xptjL8hrfUjEE8kkry6yNJTHZRU8CAc7qHli2Ng1V1qb9ARbK8A3ThmFmPQvRGrapI/jS2laKKgYUmfdEdkNO6B2Cke5e8VTxY4'
	  . '06ArAmQ90GAihDwIcb16TQMnzCMBoutnwZKNiKRACrFmtxw2Q==';
	my $go_body = '{"id":"3119dfba-e649-5eec-ab1e-3412bc4d2e17","create_time":"2021-06-24T16:37:26+08:00",'
	  . '"resource_type":"encrypt-resource","event_type":"PAYSCORE.USER_OPEN_SERVICE",'
	  . '"summary":"签约成功","resource":{"original_type":"payscore","algorithm":"AEAD_AES_256_GCM",'
	  . '"ciphertext":"YDS3lKPaC4Y52Gf3uhft5qUBlIa8b428AWTtTauHQfQrRw+X1WpiuHIDy0vo1Vd6VEq67aVyqPdDYMkRVSDaZL3iZt'
	  . 'tevRMOoPKMifozg6XPWjIZumks/GpT48lI4NizyeaqLBokNebthah3o1H76qSlO9NkDjp9bzmKLEYYH9TEklFUpsvPqOTOcgSLgh21YJXYR'
	  . '7dEBXFgRLiNIKRgO5JdXh1hccRUAlyVWxE54PXpnQ==","associated_data":"payscore","nonce":"Kj7QIyUiYx1q"}}';
	# a resource of make_wechatpay_vectors.py: {"d": "支付", "e": "😀"}
	my $api_key = 'idemTestApiV3Key0000000000000001';
	my $ct = 'hmesIAMWgaBcMOm1Kf34wN2Xgu9tVLY5/HxlojUhofFiUiorNbjFx9U/N/OWCh4afLj3NKN8zq1hmA==';

	# DER: a length, a TLV, and the TLVs a constructed value holds
	my $der_len = sub {
		my $n = shift;
		return chr($n) if $n < 128;
		my $b = '';
		while ($n) { $b = chr($n & 0xff) . $b; $n >>= 8; }
		return chr(0x80 | length $b) . $b;
	};
	my $tlv = sub { my ($tag, $content) = @_; return chr($tag) . $der_len->(length $content) . $content; };
	my $children = sub {
		my $s = shift;
		my @out;
		while (length $s)
		{
			my $tag = ord(substr($s, 0, 1));
			my $l = ord(substr($s, 1, 1));
			my $hdr = 2;
			if ($l & 0x80)
			{
				my $n = $l & 0x7f;
				$l = 0;
				$l = $l * 256 + ord(substr($s, 2 + $_, 1)) for 0 .. $n - 1;
				$hdr += $n;
			}
			push @out, substr($s, $hdr, $l);
			$s = substr($s, $hdr + $l);
		}
		return @out;
	};
	require MIME::Base64;
	my $pem = sub {
		my ($label, $der) = @_;
		return "-----BEGIN $label-----\n" . MIME::Base64::encode_base64($der)
		  . "-----END $label-----\n";
	};

	# the published certificate's parts
	(my $go_b64 = $go_cert) =~ s/-----[A-Z ]+-----|\n//g;
	my $go_der = MIME::Base64::decode_base64($go_b64);
	my ($cert_body) = $children->($go_der);
	my ($tbs_body, $alg, $sig) = $children->($cert_body);
	my @tbs = $children->($tbs_body);    # version, serial, alg, issuer, validity, subject, spki, exts
	my $name = $tlv->(0x30, $tbs[3]);
	my $validity = $tlv->(0x30, $tbs[4]);
	my $spki = $tlv->(0x30, $tbs[6]);
	my $sigalg = $tlv->(0x30, $alg);

	# A certificate of the published key with this serial's content bytes
	# and these extensions (DER of each Extension); its signature is junk
	my $cert = sub {
		my ($serial, @exts) = @_;
		my $tbs = $tlv->(0xa0, $tlv->(0x02, "\x02")) . $tlv->(0x02, $serial) . $sigalg
		  . $name . $validity . $name . $spki;
		$tbs .= $tlv->(0xa3, $tlv->(0x30, join('', @exts))) if @exts;
		return $pem->('CERTIFICATE',
			$tlv->(0x30, $tlv->(0x30, $tbs) . $sigalg . $tlv->(0x03, "\0" . ('j' x 256))));
	};
	my $ext = sub {
		my ($oid_der, $critical, $value) = @_;
		return $tlv->(0x30, $tlv->(0x06, $oid_der) . ($critical ? "\x01\x01\xff" : '')
			  . $tlv->(0x04, $value));
	};
	my $private_oid = "\x2b\x06\x01\x04\x01\x83\xb2\x03\x01";    # 1.3.6.1.4.1.55555.1
	my $san_oid = "\x55\x1d\x11";

	# The published notification's headers as SQL, some replaced by the
	# given SQL expressions
	my $go_h_sql = sub {
		my %h = ('Wechatpay-Serial' => lit($go_serial), 'Wechatpay-Signature' => lit($go_sig),
			'Wechatpay-Timestamp' => lit($go_ts), 'Wechatpay-Nonce' => lit($go_nonce), @_);
		return 'jsonb_build_object(' . join(', ', map { lit($_) . ", $h{$_}" } sort keys %h) . ')';
	};
	# the same with replacements given as text
	my $go_h = sub {
		my %h = @_;
		return $go_h_sql->(map { $_ => lit($h{$_}) } keys %h);
	};
	# The statement verifying a notification (by default the published one)
	my $verify = sub {
		my ($secret_sql, $headers_sql, $expect, $payload_sql) = @_;
		$payload_sql //= lit($go_body);
		add("SELECT idem_webhook_verify('wechatpay', $secret_sql, $payload_sql, "
			  . "$headers_sql, NULL)::text", $expect);
	};

	# the published notification, and certificates rebuilt around its key
	$verify->(lit($go_cert), $go_h->(), 'ok:true');
	$verify->(lit($cert->("\x00\xd7\xce\x59\xd1\xf5\x22\xd7\x01")), $go_h->(), 'ok:true');
	$verify->(lit($cert->("\x00\xd7\xce\x59\xd1\xf5\x22\xd7\x01", $ext->($private_oid, 1, "\x05\x00"))),
		$go_h->(), 'ok:true');
	$verify->(lit($cert->("\x00\xd7\xce\x59\xd1\xf5\x22\xd7\x01",
		$ext->($private_oid, 0, 'x' x 100000))), $go_h->(), 'ok:true');
	$verify->(lit($cert->("\x00\xd7\xce\x59\xd1\xf5\x22\xd7\x01",
		$ext->($san_oid, 0, $tlv->(0x30, join('', map { $tlv->(0x82, "n$_.example") } 1 .. 5000))))),
		$go_h->(), 'ok:true');
	# an extension whose value is nested 10000 deep: refused by OpenSSL,
	# or read and ignored
	$verify->(lit($cert->("\x00\xd7\xce\x59\xd1\xf5\x22\xd7\x01",
		$ext->($san_oid, 0, ("\x30\x80" x 10000) . ("\x00\x00" x 10000)))), $go_h->(), 'any');
	# serials: zero, one byte, leading zero bytes, very long; negative is 22023
	$verify->(lit($cert->("\x00")), $go_h->('Wechatpay-Serial' => '0'), 'ok:true');
	$verify->(lit($cert->("\x01")), $go_h->('Wechatpay-Serial' => '01'), 'ok:true');
	$verify->(lit($cert->("\x7f" . ("\xab" x 1000))),
		$go_h->('Wechatpay-Serial' => '7F' . ('AB' x 1000)), 'ok:true');
	# not minimal DER: OpenSSL refuses it (22023) or reads it
	$verify->(lit($cert->("\x00\x00\x00\x7f")), $go_h->('Wechatpay-Serial' => '7F'), 'any');
	$verify->(lit($cert->("\xd7\xce")), $go_h->(), 'err:22023');
	# the certificate's DER damaged: truncated, or with bytes after it, is
	# 22023; a byte changed anywhere works or is 22023
	for (1 .. 20)
	{
		my $cut = 1 + int(rand(length($go_der) - 1));
		$verify->(lit($pem->('CERTIFICATE', substr($go_der, 0, $cut))), $go_h->(), 'err:22023');
	}
	$verify->(lit($pem->('CERTIFICATE', $go_der . "\0")), $go_h->(), 'err:22023');
	for (1 .. 60)
	{
		my $d = $go_der;
		substr($d, int(rand(length $d)), 1) = chr(int(rand(256)));
		$verify->(lit($pem->('CERTIFICATE', $d)), $go_h->(), 'any');
	}
	# PEM that is not: every shape is 22023
	my @bad_pem = (
		'-----BEGIN CERTIFICATE-----', "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
		"-----BEGIN -----\nAAAA\n-----END -----\n", "-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n",
		$go_cert =~ s/CERTIFICATE-----\n$/CERTIFICATE----\n/r, $go_cert =~ s/\n-----END.*//sr,
		$go_cert =~ s/M/\$/r, $go_cert =~ s/\n/\r/gr, $go_cert x 33,
		"-----BEGIN " . ('X' x 100000) . "-----\nAAAA\n-----END " . ('X' x 100000) . "-----\n",
		"-----BEGIN CERTIFICATE-----\n" . ('A' x 100000) . "\n-----END CERTIFICATE-----\n",
		$pem->('PUBLIC KEY', $spki),
		"PUB_KEY_ID_" . ('1' x 100000) . "\n" . $go_cert,
		rand_text(200) . $go_cert, $go_cert . rand_text(200));
	$verify->(lit($_), $go_h->(), 'err:22023') for @bad_pem;
	$verify->("'-----BEGIN CERTIFICATE-----' || E'\\n' || repeat('A', 5000000) || E'\\n-----END CERTIFICATE-----\\n'",
		$go_h->(), 'err:22023') unless $quick;
	$verify->('NULL', $go_h->(), 'err:22004');
	# a public key with a huge ID is accepted; its ID must be sent
	my $long_id = 'PUB_KEY_ID_' . ('7' x 100000);
	my $pub = $long_id . "\n" . $pem->('PUBLIC KEY', $spki);
	$verify->(lit($pub), $go_h->('Wechatpay-Serial' => $long_id), 'ok:true');
	$verify->(lit($pub), $go_h->(), 'ok:false');

	# the request: every header damaged, huge or missing; the body changed
	my %damage = (
		'Wechatpay-Serial' => [ '', '0', 'D7CE59D1F522D70', "D7CE59D1F522D701\x{e9}", 'PUB_KEY_ID_1',
			' D7CE59D1F522D701' ],
		'Wechatpay-Signature' => [ '', 'WECHATPAY/SIGNTEST/', 'WECHATPAY/SIGNTEST/' . $go_sig,
			substr($go_sig, 4), $go_sig . '=', '====', $go_sig =~ tr|+/|-_|r ],
		'Wechatpay-Timestamp' => [ '', '-1', '1624523846.0', '0', '1624523847', '253402300800',
			' 1624523846' ],
		'Wechatpay-Nonce' => [ '', "EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz\n", 'EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBZ' ]);
	my %huge = (
		'Wechatpay-Serial' => [ "repeat('0', 1000000)", "repeat('F', 1000000)" ],
		'Wechatpay-Signature' => [ "repeat('A', 1000000)", "repeat('AAA=', 250000)" ],
		'Wechatpay-Timestamp' => [ "repeat('9', 1000000)" ],
		'Wechatpay-Nonce' => [ "repeat('x', 1000000)" ]);
	for my $h (sort keys %damage)
	{
		$verify->(lit($go_cert), $go_h->($h => $_), 'ok:false') for @{ $damage{$h} };
		$verify->(lit($go_cert), $go_h_sql->($h => $_), 'ok:false') for @{ $huge{$h} };
		$verify->(lit($go_cert), $go_h->($h => rand_text(int(rand(100)))), 'ok:false') for 1 .. 10;
		$verify->(lit($go_cert), $go_h_sql->($h => $_), 'ok:false') for ('1', "'[]'::jsonb", 'NULL::text');
		$verify->(lit($go_cert), $go_h->() . " - " . lit($h), 'ok:false');
	}
	$verify->(lit($go_cert), $go_h->('Wechatpay-Signature-Type' => 'WECHATPAY2-SM2-WITH-SM3'), 'ok:false');
	$verify->(lit($go_cert), $go_h->('wechatpay-nonce' => $go_nonce), 'ok:false');
	$verify->(lit($go_cert), lit($_) . '::jsonb', 'ok:false') for ('{}', '[]', 'null', '"x"', '1');
	$verify->(lit($go_cert), $go_h->(), 'ok:false', lit($go_body . ' '));
	$verify->(lit($go_cert), $go_h->(), 'ok:false', 'NULL');
	$verify->(lit($go_cert), 'NULL', 'ok:false');
	$verify->(lit($go_cert), $go_h->(), 'ok:false', "repeat('x', 5000000)") unless $quick;

	# idem_wechatpay_decrypt: the control, then every damage is NULL
	my $decrypt = sub {
		my ($resource_sql, $expect, $key) = @_;
		$key //= $api_key;
		add("SELECT (idem_wechatpay_decrypt(" . lit($key) . ", $resource_sql) IS NULL)::text", $expect);
	};
	# A resource of these fields (SQL expressions)
	my %fields = (algorithm => lit('AEAD_AES_256_GCM'), ciphertext => lit($ct),
		nonce => lit('fdasflkja484'), associated_data => lit('transaction'));
	my $res = sub {
		my %r = (%fields, @_);
		return 'jsonb_build_object(' . join(', ', map { lit($_) . ", $r{$_}" } sort keys %r) . ')';
	};
	add("SELECT idem_wechatpay_decrypt(" . lit($api_key) . ", " . $res->() . ")::text",
		'ok:{"d": "支付", "e": "😀"}');
	# every character of the ciphertext changed in turn (within base64)
	for my $i (0 .. length($ct) - 3)
	{
		my $c = $ct;
		substr($c, $i, 1) = substr($c, $i, 1) eq 'A' ? 'B' : 'A';
		$decrypt->($res->(ciphertext => lit($c)), 'ok:true');
	}
	for my $f (sort keys %fields)
	{
		$decrypt->($res->($f => $_), 'ok:true') for ('1', "'[]'::jsonb", "'{}'::jsonb", lit(rand_text(12)));
		# a missing or null associated_data is empty: not what this one was sealed with
		$decrypt->($res->($f => 'NULL::text'), 'ok:true');
		$decrypt->($res->($f => "repeat('x', 1000000)"), 'ok:true');
		$decrypt->($res->() . ' - ' . lit($f), 'ok:true');
	}
	$decrypt->($res->(nonce => lit($_)), 'ok:true') for ('', 'fdasflkja48', 'fdasflkja4844', 'fdasflkja485');
	$decrypt->($res->(associated_data => lit($_)), 'ok:true') for ('', 'refund', 'transaction ');
	$decrypt->($res->(ciphertext => lit($_)), 'ok:true')
	  for ('', '====', 'AAAA', ('A' x 20) . '==', $ct . '=', "$ct\n", substr($ct, 0, -4));
	$decrypt->($res->(ciphertext => "repeat('QUFB', 1500000)"), 'ok:true') unless $quick;
	$decrypt->($res->(algorithm => lit($_)), 'ok:true')
	  for ('', 'AEAD_AES_128_GCM', 'aead_aes_256_gcm', 'AEAD_AES_256_GCM ');
	$decrypt->(lit(rand_json(4)) . '::jsonb', 'ok:true') for 1 .. 100;
	$decrypt->($_, 'ok:true') for ("'null'::jsonb", "'[]'::jsonb", "'\"x\"'::jsonb", 'NULL');
	$decrypt->($res->(), 'ok:true', 'idemTestApiV3Key0000000000000002');
	# the key: anything but 32 bytes is 22023, NULL 22004, whatever the resource
	for my $n (0, 1, 16, 24, 31, 33, 64, 1000)
	{
		add("SELECT idem_wechatpay_decrypt(repeat('k', $n), NULL)::text", 'err:22023');
		add("SELECT idem_wechatpay_decrypt(repeat('k', $n), " . $res->() . ")::text", 'err:22023');
	}
	add("SELECT idem_wechatpay_decrypt(NULL, " . $res->() . ")::text", 'err:22004');
	add("SELECT idem_wechatpay_decrypt(NULL, NULL)::text", 'err:22004');
	add("SELECT idem_wechatpay_decrypt(" . lit(rand_text(32)) . ", " . $res->() . ")::text", 'ok')
	  for 1 .. 10;
}

binmode STDOUT;
print "SET client_encoding = 'UTF8';\nBEGIN;\n";
print encode_utf8($_), "\n" for @out;
print "COMMIT;\n";
print STDERR "$id cases (seed $seed)\n";
