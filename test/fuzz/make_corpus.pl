#!/usr/bin/perl
# Writes the seed corpus of the fuzz targets (test/fuzz/corpus/<target>/seed-*)
# and their fixed keys (test/fuzz/keys/) from the tests' own vectors: the
# \set lines of test/regress/sql/webhook*.sql, which test/vectors/ made
# with the openssl command line.  A seed is a delivery, a header, a form, a
# key... as the regression tests send it, in the input format of its target
# (the comment at the top of each test/fuzz/fuzz_<target>.c).  Files the
# fuzzer added (named by their SHA-1) are left alone.
#
# Usage: perl test/fuzz/make_corpus.pl (from anywhere; run again when the
# vectors change, and commit what it writes)
use strict;
use warnings;

use Encode qw(decode_utf8 encode);
use File::Basename qw(dirname);
use File::Path qw(make_path);
use JSON::PP;
use MIME::Base64 qw(decode_base64);

my $fuzz = dirname(__FILE__);
my $root = "$fuzz/../..";
my %v;

# psql's \set '...' quoting: '' is a quote, \n a newline, \\ a backslash
sub unquote
{
	my ($s) = @_;
	$s =~ s/''/'/g;
	$s =~ s/\\(\\|n|t|r)/$1 eq 'n' ? "\n" : $1 eq 't' ? "\t" : $1 eq 'r' ? "\r" : "\\"/ge;
	return $s;
}

for my $file (sort glob("$root/test/regress/sql/webhook*.sql"))
{
	open(my $fh, '<:raw', $file) or die "$file: $!";
	while (my $line = <$fh>)
	{
		$v{$1} = unquote($2) if $line =~ /^\\set (\w+) '(.*)'$/;
	}
	close($fh);
}

# A vector, which must exist
sub v
{
	my ($name) = @_;
	die "no vector $name in test/regress/sql/webhook*.sql\n" unless defined $v{$name};
	return $v{$name};
}

# One line of JSON of a hash of UTF-8 byte strings, names sorted
my $json = JSON::PP->new->utf8->canonical;

sub json_line
{
	my ($h) = @_;
	return $json->encode(decode_strings($h));
}

# UTF-8 bytes to characters, all through a structure
sub decode_strings
{
	my ($x) = @_;
	return { map { decode_utf8($_) => decode_strings($x->{$_}) } keys %$x } if ref $x eq 'HASH';
	return [ map { decode_strings($_) } @$x ] if ref $x eq 'ARRAY';
	return $x if ref $x || !defined $x;
	return decode_utf8($x);
}

# Write a file of bytes
sub write_file
{
	my ($path, $bytes) = @_;
	open(my $fh, '>:raw', $path) or die "$path: $!";
	print $fh $bytes;
	close($fh) or die "$path: $!";
	return;
}

# ---- keys -------------------------------------------------------------------
my $pub_secret = v('pub_key_id') . "\n" . v('pub_c');
my %keys = (
	stripe => v('stripe_secret'),
	standard => v('std_secret'),
	standard_pk => v('std_pk'),
	github => v('gh_secret'),
	shopify => v('shop_secret'),
	razorpay => v('rzp_secret'),
	checkout => v('cko_secret'),
	paddle => v('pdl_secret'),
	adyen => v('adyen_key'),
	adyen_platform => v('adyen_key'),
	square => v('sq_url') . ' ' . v('sq_key'),
	paystack => v('psk_secret'),
	airwallex => v('awx_secret'),
	antom => v('antom_path') . "\n" . v('antom_pub_pem'),
	mercadopago => v('mp_secret'),
	alipay => v('alipay_key'),
	alipay_v3 => v('v3_pub_pem'),
	unionpay => v('unionpay_root') . v('unionpay_middle'),
	wechatpay => v('go_cert') . v('cert_a') . v('cert_b') . $pub_secret,
	wechatpay_api_key => v('api_key'),
	paypal => json_line({ webhook_id => v('paypal_webhook_id'), subject => 'messageverificationcerts.paypal.com',
		roots => v('paypal_root') . v('paypal_middle') }),
);
make_path("$fuzz/keys");
write_file("$fuzz/keys/$_", $keys{$_}) for keys %keys;

# ---- seeds --------------------------------------------------------------------
my %seeds;

# Add a seed of a target
sub seed
{
	my ($target, $name, $bytes) = @_;
	die "two seeds $target/$name\n" if exists $seeds{$target}{$name};
	$seeds{$target}{$name} = $bytes;
	return;
}

# The Adyen notification item of the tests (signed by adyen_sig under adyen_key)
my %adyen_item = (
	additionalData => { hmacSignature => v('adyen_sig'), paymentMethod => 'visa' },
	amount => { currency => v('adyen_currency'), value => 'NUMBER:' . v('adyen_value') },
	eventCode => v('adyen_event'),
	eventDate => '2024-05-06T17:15:34+02:00',
	merchantAccountCode => v('adyen_merchant'),
	merchantReference => v('adyen_ref'),
	originalReference => v('adyen_orig'),
	pspReference => v('adyen_psp'),
	reason => '',
	success => v('adyen_success'),
	operations => [ 'CANCEL', 'REFUND' ],
);
# (amount.value is a number: written as a string, then unquoted)
my $adyen = json_line(\%adyen_item) =~ s/"NUMBER:(\d+)"/$1/r;
my $adyen_wrapped = json_line({ NotificationRequestItem => \%adyen_item }) =~ s/"NUMBER:(\d+)"/$1/r;

# The headers of WeChat Pay's notifications
sub wx
{
	my ($serial, $sig, $ts, $nonce) = @_;
	return json_line({ 'Wechatpay-Serial' => $serial, 'Wechatpay-Signature' => $sig,
		'Wechatpay-Timestamp' => $ts, 'Wechatpay-Nonce' => $nonce });
}

# The headers of PayPal's webhooks, signed by sig, with the certificates pem
sub pp
{
	my ($sig, $pem) = @_;
	return json_line({ 'PAYPAL-TRANSMISSION-ID' => v('paypal_tid'),
		'PAYPAL-TRANSMISSION-TIME' => v('paypal_time'), 'PAYPAL-TRANSMISSION-SIG' => $sig,
		'PAYPAL-AUTH-ALGO' => 'SHA256withRSA', 'PAYPAL-CERT-PEM' => $pem });
}

# Deliveries of each scheme: [variant index of fuzz_verify.c, name, headers, body]
my @deliveries = (
	[ 0, 'stripe', json_line({ 'Stripe-Signature' => 't=' . v('stripe_t') . ',v1=' . v('stripe_sig') }), v('stripe_payload') ],
	[ 0, 'stripe-utf8', json_line({ 'Stripe-Signature' => 't=' . v('stripe_t') . ',v1=' . v('stripe_sig_utf8') }), v('stripe_payload_utf8') ],
	[ 0, 'stripe-rotation', json_line({ 'Stripe-Signature' => 't=' . v('stripe_t') . ',v1=' . v('stripe_sig_b') . ', v1=' . v('stripe_sig') . ',v0=00' }), v('stripe_payload') ],
	[ 1, 'standard', json_line({ 'webhook-id' => v('std_id'), 'webhook-timestamp' => v('std_ts'), 'webhook-signature' => 'v1,' . v('std_sig') }), v('std_payload') ],
	[ 1, 'standard-list', json_line({ 'webhook-id' => v('std_id'), 'webhook-timestamp' => v('std_ts'), 'webhook-signature' => 'v1,' . v('std_sig_b') . ' v1a,' . v('std_sig_v1a') . '  v1,' . v('std_sig') }), v('std_payload') ],
	[ 2, 'standard-ed25519', json_line({ 'webhook-id' => v('std_id'), 'webhook-timestamp' => v('std_ts'), 'webhook-signature' => 'v1a,' . v('std_sig_v1a') }), v('std_payload') ],
	[ 3, 'svix', json_line({ 'svix-id' => v('std_id'), 'svix-timestamp' => v('std_ts'), 'svix-signature' => 'v1,' . v('std_sig') }), v('std_payload') ],
	[ 4, 'github', json_line({ 'X-Hub-Signature-256' => 'sha256=' . v('gh_sig'), 'X-GitHub-Delivery' => '72d3162e-cc78-11e3-81ab-4c9367dc0958' }), v('gh_payload') ],
	[ 4, 'github-json', json_line({ 'X-Hub-Signature-256' => 'sha256=' . v('gh_sig_json'), 'X-GitHub-Delivery' => 'd1' }), v('gh_json') ],
	[ 5, 'shopify', json_line({ 'X-Shopify-Hmac-Sha256' => v('shop_sig'), 'X-Shopify-Webhook-Id' => 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043' }), v('shop_payload') ],
	[ 6, 'razorpay', json_line({ 'X-Razorpay-Signature' => v('rzp_sig'), 'X-Razorpay-Event-Id' => 'JmWQpUhSLZGu7H' }), v('rzp_payload') ],
	[ 7, 'checkout', json_line({ 'Cko-Signature' => v('cko_sig') }), v('cko_payload') ],
	[ 8, 'paddle', json_line({ 'Paddle-Signature' => 'ts=' . v('pdl_ts') . ';h1=' . v('pdl_sig') }), v('pdl_payload') ],
	[ 8, 'paddle-rotation', json_line({ 'Paddle-Signature' => 'ts=' . v('pdl_ts') . ';h1=' . v('pdl_sig_b') . ';h1=' . v('pdl_sig') }), v('pdl_payload') ],
	[ 9, 'adyen', '{}', $adyen ],
	[ 9, 'adyen-wrapped', '{}', $adyen_wrapped ],
	[ 12, 'wechatpay', wx(v('serial_a_go'), v('sig_a'), v('timestamp'), v('nonce')), v('body') ],
	[ 12, 'wechatpay-go', wx(v('go_serial'), v('go_signature'), v('go_timestamp'), v('go_nonce')), v('go_body') ],
	[ 12, 'wechatpay-public-key', wx(v('pub_key_id'), v('sig_c'), v('timestamp'), v('nonce')), v('body') ],
	[ 12, 'wechatpay-probe', wx(v('serial_a_go'), 'WECHATPAY/SIGNTEST/' . v('sig_a'), v('timestamp'), v('nonce')), v('body') ],
	[ 13, 'adyen-platform', json_line({ 'HmacSignature' => v('adyp_sig') }), v('adyp_payload') ],
	[ 14, 'square', json_line({ 'x-square-hmacsha256-signature' => v('sq_sig') }), v('sq_body') ],
	[ 15, 'paystack', json_line({ 'x-paystack-signature' => v('psk_sig') }), v('psk_payload') ],
	[ 16, 'airwallex', json_line({ 'x-timestamp' => v('awx_ts'), 'x-signature' => v('awx_sig') }), v('awx_payload') ],
	[ 17, 'antom', json_line({ 'client-id' => v('antom_client'), 'request-time' => v('antom_time'), 'signature' => 'algorithm=RSA256,keyVersion=1,signature=' . v('antom_sig') }), v('antom_body') ],
	[ 18, 'paypal', pp(v('paypal_sig'), v('paypal_signer') . v('paypal_middle')), v('paypal_body') ],
	[ 18, 'paypal-signer-only', pp(v('paypal_sig'), v('paypal_signer')), v('paypal_body') ],
	[ 18, 'paypal-other-root', pp(v('paypal_sig'), v('paypal_signer_other_root') . v('paypal_other_root')), v('paypal_body') ],
	[ 18, 'paypal-expired', pp(v('paypal_sig'), v('paypal_signer_expired') . v('paypal_middle')), v('paypal_body') ],
	[ 19, 'mercadopago', json_line({ 'x-signature' => 'ts=' . v('mp_ts') . ',v1=' . v('mp_sig'), 'x-request-id' => v('mp_request_id') }), v('mp_payload') ],
	[ 19, 'mercadopago-ms', json_line({ 'x-signature' => 'ts=' . v('mp_ts_ms') . ', v1=' . v('mp_sig_ms'), 'x-request-id' => v('mp_request_id') }), v('mp_payload') ],
	[ 19, 'mercadopago-no-request-id', json_line({ 'x-signature' => 'v1=' . v('mp_sig_noreq') . ',ts=' . v('mp_ts') }), v('mp_payload') ],
	[ 19, 'mercadopago-upper-id', json_line({ 'x-signature' => 'ts=' . v('mp_ts') . ',v1=' . v('mp_sig_alnum'), 'x-request-id' => v('mp_request_id') }), v('mp_alnum_payload') ],
	[ 20, 'alipay-v3', json_line({ 'alipay-timestamp' => v('v3_ts'), 'alipay-nonce' => v('v3_nonce'), 'alipay-signature' => v('v3_sig') }), v('v3_body') ],
);
for my $name (sort grep { /^alipay_form/ } keys %v)
{
	push @deliveries, [ 10, $name =~ s/_/-/gr, '{}', v($name) ];
}
for my $name (sort grep { /^unionpay_form/ } keys %v)
{
	push @deliveries, [ 11, $name =~ s/_/-/gr, '{}', v($name) ];
}
for my $d (@deliveries)
{
	my ($variant, $name, $headers, $body) = @$d;
	seed('verify', $name, chr($variant) . "$headers\n$body");
	# the same with the five-minute tolerance (stale: the vectors are old)
	seed('verify', "$name-tolerance", chr($variant | 0x80) . "$headers\n$body")
	  if $variant < 10;
}

# ---- header: a name, then headers; separators , ; space = -------------------------
seed('header', 'stripe', chr(0) . "stripe-signature\n" . $deliveries[0][2]);
seed('header', 'stripe-rotation', chr(0) . "Stripe-Signature\n" . $deliveries[2][2]);
seed('header', 'paddle', chr(1) . "paddle-signature\n" . $deliveries[12][2]);
seed('header', 'standard-list', chr(2) . "webhook-signature\n" . $deliveries[4][2]);
seed('header', 'standard-timestamp', chr(4 | 2) . "webhook-timestamp\n" . $deliveries[3][2]);
seed('header', 'standard-timestamp-tolerance', chr(8 | 2) . "webhook-timestamp\n" . $deliveries[3][2]);
seed('header', 'github', chr(3) . "x-hub-signature-256\n" . $deliveries[7][2]);
seed('header', 'wechatpay-timestamp', chr(8) . "wechatpay-timestamp\n" . $deliveries[16][2]);
seed('header', 'wechatpay-serial', chr(0) . "WECHATPAY-SERIAL\n" . $deliveries[16][2]);
seed('header', 'twice-in-two-cases', chr(0) . "stripe-signature\n" . '{"Stripe-Signature": "t=1", "stripe-signature": "t=2"}');
seed('header', 'twice-in-one-case', chr(0) . "stripe-signature\n" . '{"stripe-signature": "t=1", "stripe-signature": "t=2,v1=ab"}');
seed('header', 'not-a-string', chr(0) . "x-id\n" . '{"x-id": {"a": [1, 2.5, true, null]}, "y": false}');
seed('header', 'array', chr(0) . "x-id\n" . '["x-id", "v"]');
seed('header', 'scalar', chr(0) . "x-id\n" . '"x-id"');
seed('header', 'padded-list', chr(0) . "h\n" . "{\"h\": \" t = 1700000000 ,\\t,v1=\\tab ,, =x, y= \"}");
seed('header', 'far-timestamp', chr(12) . "t\n" . '{"t": "253402300799"}');

# ---- codec: signatures, keys and not quite base64 -----------------------------------
for my $name (qw(stripe_sig std_sig std_sig_v1a shop_sig adyen_sig adyen_key sig_a
	go_signature alipay_key_b64 res_empty_plain res_scalar java_ciphertext))
{
	seed('codec', $name =~ s/_/-/gr, v($name));
}
seed('codec', "secret-$_", $keys{$_} =~ s/^wh(sec|pk)_//r) for qw(standard standard_pk);
seed('codec', "bad-$_->[0]", $_->[1])
  for ([ 'empty', '' ], [ 'pad-inside', 'AB=CDEFG' ], [ 'stray-bits', 'AB==' ],
	[ 'three-pads', 'A===' ], [ 'space', 'AAAA AAAA' ], [ 'odd-hex', 'abc' ],
	[ 'hex-upper', 'ABCDEF0123456789' ], [ 'url-safe', 'ab-_' ]);

# ---- siglist: options, then the lines of fuzz_siglist.c -----------------------------
seed('siglist', 'stripe', chr(0) . 't=' . v('stripe_t') . ',v1=' . v('stripe_sig') . "\n" . v('stripe_payload'));
seed('siglist', 'stripe-mac', chr(0) . "t=1700000000,v1={mac},v0=00\n" . v('stripe_payload'));
seed('siglist', 'stripe-mac-tolerance', chr(4) . "t=1700000000, v1=00 , v1={mac}\n" . v('stripe_payload'));
seed('siglist', 'stripe-two-t', chr(0) . "t=1700000000,t=1700000000,v1={mac}\nx");
seed('siglist', 'paddle', chr(1) . 'ts=' . v('pdl_ts') . ';h1=' . v('pdl_sig') . "\n" . v('pdl_payload'));
seed('siglist', 'paddle-mac', chr(1) . "ts=1700000000;h1=ff;h1={mac}\n" . v('pdl_payload'));
seed('siglist', 'standard', chr(2) . join("\n", v('std_id'), v('std_ts'), 'v1,' . v('std_sig'), v('std_payload')));
seed('siglist', 'standard-mac', chr(2) . join("\n", 'msg_1', '1700000000', 'v2,x v1,{mac}  v1a,AAAA', '{}'));
seed('siglist', 'svix-mac', chr(2 | 8) . join("\n", 'msg_1', '1700000000', 'v1,{mac}', '{"a":1}'));
seed('siglist', 'ed25519-mac', chr(3) . join("\n", 'msg_1', '1700000000', 'v1,AAAA v1a,{mac}', '{}'));
seed('siglist', 'ed25519-many', chr(3 | 4) . join("\n", 'msg_1', '1700000000', join(' ', ('v1a,AAAA') x 8, 'v1a,{mac}'), '{}'));

# ---- keys: mode byte, then the text --------------------------------------------------
my @pems = qw(alipay_key alipay_key_pkcs1 alipay_key_other alipay_key_ec alipay_cert
	unionpay_root unionpay_middle unionpay_signer unionpay_other_root
	unionpay_middle_expired go_cert cert_a cert_w cert_ec cert_ed cert_odd
	cert_negative pub_c pub_ec);
seed('keys', "pem-$_", chr(0) . v($_)) for @pems;
seed('keys', 'pem-several', chr(0) . "before\n" . v('alipay_key') . "between\n" . v('cert_a') . v('pub_c') . "after");
seed('keys', 'pem-crlf', chr(0) . (v('cert_b') . v('cert_a')) =~ s/\n/\r\n/gr);
seed('keys', 'pem-truncated', chr(0) . substr(v('cert_a'), 0, 300));
seed('keys', 'pem-headers', chr(0) . "-----BEGIN PUBLIC KEY-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END PUBLIC KEY-----\n");
seed('keys', 'chain-unionpay', chr(1) . v('unionpay_root') . v('unionpay_middle'));
seed('keys', 'chain-signer', chr(1) . v('unionpay_signer'));
seed('keys', 'chain-with-key', chr(1) . v('unionpay_root') . v('pub_c'));

# DER of the body of a PEM block
sub pem_der
{
	my ($pem) = @_;
	$pem =~ /-----BEGIN [^-]+-----\r?\n(.*?)-----END/s or die "no PEM block";
	return decode_base64($1);
}
for my $name (qw(alipay_key alipay_key_other alipay_key_ec pub_ec))
{
	my $der = pem_der(v($name));
	seed('keys', "der-$name", chr(2) . pack('n', length($der)) . $der . ("\x5a" x 256));
}
my $ed = pack('H*', '302a300506032b6570032100') . decode_base64(v('std_pk') =~ s/^whpk_//r);
seed('keys', 'der-ed25519', chr(2) . pack('n', length($ed)) . $ed . ("\x00" x 64));
seed('keys', 'secret-alipay', chr(3) . chr(0) . v('alipay_key'));
seed('keys', 'secret-alipay-b64', chr(3) . chr(0) . v('alipay_key_b64_wrapped'));
seed('keys', 'secret-alipay-pkcs1', chr(3) . chr(0) . v('alipay_key_pkcs1') . v('alipay_key_other'));
seed('keys', 'secret-alipay-ec', chr(3) . chr(0) . v('alipay_key_ec'));
seed('keys', 'secret-alipay-cert', chr(3) . chr(0) . v('alipay_cert'));
seed('keys', 'secret-wechatpay', chr(3) . chr(1) . $keys{wechatpay});
seed('keys', 'secret-wechatpay-crlf', chr(3) . chr(1) . (v('pub_key_id') . " \r\n" . v('pub_c')) =~ s/\n/\r\n/gr);
seed('keys', 'secret-wechatpay-negative', chr(3) . chr(1) . v('cert_negative'));
seed('keys', 'secret-unionpay', chr(3) . chr(2) . $keys{unionpay});
seed('keys', 'secret-unionpay-no-root', chr(3) . chr(2) . v('unionpay_middle'));

# ---- form: options, then the body --------------------------------------------------
for my $name (sort grep { /^(alipay|unionpay)_form/ } keys %v)
{
	my $opts = $name =~ /^unionpay/ ? 4 : 8;
	seed('form', $name =~ s/_/-/gr, chr($opts) . v($name));
}
my $gbk_literal = decode_utf8(v('alipay_form_gbk_literal'));
seed('form', 'alipay-gbk-literal-euc-cn', chr(2 | 8) . encode('euc-cn', $gbk_literal));
seed('form', 'alipay-gbk-literal-sql-ascii', chr(1 | 8) . v('alipay_form_gbk_literal'));
seed('form', 'latin1-literal', chr(3) . "charset=gbk&subject=caf\xe9&x=%E9");
seed('form', 'latin1-utf8', chr(3) . "charset=utf-8&subject=caf\xe9+cr\xe8me");
seed('form', 'edge-pieces', chr(0) . "&&a&=x&b=&c==d&%41=%4");
seed('form', 'edge-twice', chr(0) . "a=1&%61=2");
seed('form', 'edge-charset', chr(0) . "charset=GB2312&subject=\xe6\xb5\x8b");

# ---- json: options (encoding, member), then the body -------------------------------
my %members = (id => 0, event_id => 1, pspReference => 2, notify_id => 3);
my @bodies = (
	[ 'stripe', 'id', v('stripe_payload') ],
	[ 'stripe-utf8', 'id', v('stripe_payload_utf8') ],
	[ 'paddle', 'event_id', v('pdl_payload') ],
	[ 'wechatpay', 'id', v('body') ],
	[ 'wechatpay-go', 'id', v('go_body') ],
	[ 'plaintext', 'id', v('plaintext') ],
	[ 'standard', 'id', v('std_payload') ],
	[ 'adyen', 'pspReference', $adyen ],
	[ 'adyen-wrapped', 'pspReference', $adyen_wrapped ],
	[ 'escapes', 'id', '{"id": "evt_\u00e9\n\"x\"", "a": [1, -0.5e+3, true, false, null, {}]}' ],
	[ 'twice', 'id', '{"id": "a", "x": {"id": "b"}, "id": "c"}' ],
	[ 'not-a-string', 'id', '{"id": 12345}' ],
	[ 'surrogates', 'id', '{"id": "\ud83d\ude00"}' ],
	[ 'nul-elsewhere', 'id', '{"id": "evt_1", "note": "a\u0000b", "n": ["\u0000"]}' ],
	[ 'nul-in-member', 'id', '{"id": "evt_\u0000"}' ],
	[ 'deep', 'id', '{"id": "x", "d": ' . ('[' x 63) . (']' x 63) . '}' ],
	[ 'too-deep', 'id', '{"id": "x", "d": ' . ('[' x 64) . (']' x 64) . '}' ],
);
for my $b (@bodies)
{
	my ($name, $member, $text) = @$b;
	seed('json', $name, chr($members{$member} << 2) . $text);
}
seed('json', 'escape-latin1', chr(3) . '{"id": "caf\u00e9"}');
seed('json', 'escape-ascii-euc-cn', chr(2) . '{"id": "caf\u0065"}');
seed('json', 'literal-latin1', chr(3) . "{\"id\": \"caf\xe9\"}");

# ---- envelope: a resource, or nonce, associated data and plaintext ---------------------
my $resource = $json->encode(JSON::PP->new->decode(decode_utf8(v('body')))->{resource});
seed('envelope', 'resource', chr(0) . $resource);
seed('envelope', 'resource-go', chr(0) . $json->encode(JSON::PP->new->decode(decode_utf8(v('go_body')))->{resource}));
for my $name (qw(res_empty_aad res_bad_utf8 res_empty_plain res_escapes res_not_json res_nul_byte res_nul_escape res_scalar))
{
	my $aad = $name eq 'res_empty_aad' ? '' : 'transaction';
	seed('envelope', $name =~ s/_/-/gr, chr(0) . json_line({ original_type => 'transaction',
		algorithm => 'AEAD_AES_256_GCM', ciphertext => v($name),
		associated_data => $aad, nonce => v('resource_nonce') }));
}
seed('envelope', 'resource-null-aad', chr(0) . '{"algorithm": "AEAD_AES_256_GCM", "ciphertext": "' . v('res_empty_aad') . '", "nonce": "' . v('resource_nonce') . '", "associated_data": null}');
my @plain = (
	[ 'plaintext', 1, 'transaction', v('plaintext') ],
	[ 'plaintext-aad-absent', 3, '', v('plaintext') ],
	[ 'plaintext-aad-null', 5, '', v('plaintext') ],
	[ 'plaintext-flipped', 9, 'transaction', v('plaintext') ],
	[ 'plaintext-tag-flipped', 9 | 32, 'transaction', v('plaintext') ],
	[ 'plaintext-other-algorithm', 17, 'transaction', v('plaintext') ],
	[ 'scalar', 1, '', '"a scalar"' ],
	[ 'empty', 1, '', '' ],
	[ 'not-json', 1, 'x', 'not json' ],
	[ 'escapes', 1, '', '{"a": "\u00e9\ud83d\ude00"}' ],
	[ 'nul', 1, '', "{\"a\": \"\0\"}" ],
	[ 'short-nonce', 1, '', '{}' ],
);
for my $p (@plain)
{
	my ($name, $opts, $aad, $text) = @$p;
	my $nonce = $name eq 'short-nonce' ? 'abc' : v('resource_nonce');
	seed('envelope', "encrypt-$name", chr($opts) . "$nonce\n$aad\n$text");
}

# ---- write ---------------------------------------------------------------------------
for my $target (sort keys %seeds)
{
	my $dir = "$fuzz/corpus/$target";
	make_path($dir);
	unlink glob("$dir/seed-*");
	write_file("$dir/seed-$_", $seeds{$target}{$_}) for keys %{ $seeds{$target} };
}

# Inputs too large to fuzz (libFuzzer's length limit is the largest seed's),
# replayed whole by each run: a form value whose literal characters cross
# wire_form.c's conversion chunk (64 kB) in the middle of a character
my $regress = "$fuzz/regressions/form";
make_path($regress);
write_file("$regress/chunk-boundary", chr(8) . "charset=gbk&subject=a" . ("\xe6\xb5\x8b" x 22000) . "&notify_id=1");
