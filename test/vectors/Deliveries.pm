# One valid and one invalid delivery of each kind of key that
# idem_webhook_verify checks, signed at the time of the call with fresh keys
# and certificates made by the openssl command line (FormVectors.pm): an
# HMAC (stripe), Ed25519 (standard, whpk_), RSA over a form (alipay RSA2),
# RSA with a platform certificate (wechatpay), RSA with a certificate
# chain (unionpay) and with a chain the request carries (paypal); and a
# resource for idem_wechatpay_decrypt, the fixed
# one of test/regress/sql/webhook_wechatpay.sql (openssl's command line does no
# AES-GCM).  The invalid delivery of each kind differs from the valid one
# in one byte of what is signed, so it costs the same checks.  Used by
# test/tap/core/109_verify_memory.pl and bench/verify.sh (make_deliveries.pl).
#
#   my @d = Deliveries::make($dir, $regress_sql);   # list of hashes
#   my $sql = Deliveries::sql(@d);                  # CREATE TABLE deliveries
package Deliveries;

use strict;
use warnings;

use Compress::Zlib qw(crc32);
use Digest::SHA qw(hmac_sha256_hex);
use Encode qw(encode);
use JSON::PP;
use POSIX qw(strftime);

use FormVectors;

# A time $secs from now as openssl ca takes it
sub at { return strftime('%Y%m%d%H%M%SZ', gmtime(time() + $_[0])); }

# The value of "\set $name '...'" in a psql script (no escapes in it)
sub psql_var
{
	my ($file, $name) = @_;
	open(my $fh, '<:raw', $file) or die "$file: $!";
	while (<$fh>)
	{
		if (/^\\set \Q$name\E '([^'\\]*)'$/)
		{
			close($fh);
			return $1;
		}
	}
	die "no \\set $name in $file";
}

# The deliveries, each {kind, scheme, secret, payload, headers (a hash),
# valid (1 or 0)}; for kind decrypt, secret is the APIv3 key and payload
# the resource (JSON).  Keys go to $dir; $regress_sql is
# test/regress/sql/webhook_wechatpay.sql.
sub make
{
	my ($dir, $regress_sql) = @_;
	my $fv = FormVectors->new($dir);
	my $now = time();
	my @d;
	my $add = sub {
		my ($kind, $scheme, $secret, $good, $bad, $headers, $bad_headers) = @_;
		push @d, { kind => $kind, scheme => $scheme, secret => $secret, payload => $good,
			headers => $headers, valid => 1 };
		push @d, { kind => $kind, scheme => $scheme, secret => $secret, payload => $bad,
			headers => $bad_headers // $headers, valid => 0 };
	};
	my $event = '{"id":"evt_' . $now . '","object":"event","type":"payment_intent.succeeded",'
	  . '"data":{"object":{"id":"pi_1","amount":2000,"currency":"usd"}}}';
	(my $tampered = $event) =~ s/2000/2001/;

	# stripe: HMAC-SHA256 of "<t>.<payload>", keyed with the secret as given
	my $stripe = 'whsec_' . join('', map { ('a' .. 'z', 0 .. 9)[ rand 36 ] } 1 .. 32);
	$add->('hmac', 'stripe', $stripe, $event, $tampered,
		{ 'Stripe-Signature' => "t=$now,v1=" . hmac_sha256_hex("$now.$event", $stripe) });

	# standard: v1a, Ed25519 over "<id>.<timestamp>.<payload>"
	$fv->ed25519_key('standard');
	my $id = "msg_$now";
	$add->('ed25519', 'standard', 'whpk_' . $fv->ed25519_public_base64('standard'), $event,
		$tampered,
		{ 'webhook-id' => $id, 'webhook-timestamp' => "$now",
		  'webhook-signature' => 'v1a,' . $fv->ed25519_sign('standard', "$id.$now.$event") });

	# alipay: RSA2 (SHA256withRSA) over the sorted form
	$fv->rsa_key('alipay');
	my @alipay = ([ 'app_id', '2021000000000001' ], [ 'charset', 'utf-8' ],
		[ 'notify_id', "n-$now" ], [ 'out_trade_no', 'order-1' ], [ 'subject', 'idem' ],
		[ 'total_amount', '12.30' ], [ 'trade_status', 'TRADE_SUCCESS' ]);
	my $form = $fv->alipay_form('alipay', 'RSA2', \@alipay);
	(my $bad_form = $form) =~ s/total_amount=12\.30/total_amount=12.31/ or die;
	$add->('rsa_form', 'alipay', $fv->public_pem('alipay'), $form, $bad_form, {});

	# wechatpay: SHA256withRSA over "<timestamp>\n<nonce>\n<body>\n" by the
	# key of a platform certificate, which Wechatpay-Serial names
	$fv->rsa_key('wechatpay');
	my $cert = $fv->certificate(key => 'wechatpay', subject => '/CN=idem test platform',
		ext => 'signer_ext', start => at(-86400), end => at(86400 * 365));
	my $nonce = 'n' . $now;
	$add->('rsa_cert', 'wechatpay', $cert, $event, $tampered,
		{ 'Wechatpay-Serial' => $fv->serial('wechatpay'), 'Wechatpay-Timestamp' => "$now",
		  'Wechatpay-Nonce' => $nonce,
		  'Wechatpay-Signature' => $fv->sign('wechatpay', 'sha256', "$now\n$nonce\n$event\n") });

	# unionpay: the form's certificate chains to a root and an intermediate
	my $company = encode('UTF-8',
		"\x{4E2D}\x{56FD}\x{94F6}\x{8054}\x{80A1}\x{4EFD}\x{6709}\x{9650}\x{516C}\x{53F8}");
	$fv->rsa_key($_) for qw(root middle signer);
	my $root = $fv->certificate(key => 'root', subject => '/CN=idem test root', ext => 'ca_ext',
		start => at(-86400), end => at(86400 * 365));
	my $middle = $fv->certificate(key => 'middle', subject => '/CN=idem test middle',
		issuer => 'root', ext => 'ca_ext', start => at(-86400), end => at(86400 * 365));
	my $signer = $fv->certificate(key => 'signer', subject => "/CN=041\@Z1\@$company\@00000001",
		issuer => 'middle', ext => 'signer_ext', start => at(-86400), end => at(86400 * 365));
	my @unionpay = ([ 'encoding', 'UTF-8' ], [ 'merId', '777290058110048' ],
		[ 'orderId', 'order-1' ], [ 'queryId', "q$now" ], [ 'respCode', '00' ],
		[ 'signMethod', '01' ], [ 'txnAmt', '1230' ], [ 'txnType', '01' ],
		[ 'version', '5.1.0' ]);
	$form = $fv->unionpay_form('signer', $signer, \@unionpay);
	($bad_form = $form) =~ s/txnAmt=1230/txnAmt=1231/ or die;
	$add->('rsa_chain', 'unionpay', $root . $middle, $form, $bad_form, {});

	# paypal: SHA256withRSA of "<id>|<time>|<webhook id>|<CRC-32 of the body>"
	# by the certificate of PAYPAL-CERT-PEM, which chains to the same root
	$fv->rsa_key('paypal');
	my $subject = 'messageverificationcerts.paypal.com';
	my $paypal = $fv->certificate(key => 'paypal', subject => "/CN=$subject", issuer => 'middle',
		ext => 'signer_ext', start => at(-86400), end => at(86400 * 365));
	my $when = strftime('%Y-%m-%dT%H:%M:%SZ', gmtime($now));
	my $signed = "t$now|$when|WH$now|" . crc32($event);
	$add->('rsa_paypal', 'paypal',
		JSON::PP->new->canonical->encode({ webhook_id => "WH$now", subject => $subject, roots => $root }),
		$event, $tampered,
		{ 'PAYPAL-TRANSMISSION-ID' => "t$now", 'PAYPAL-TRANSMISSION-TIME' => $when,
		  'PAYPAL-AUTH-ALGO' => 'SHA256withRSA', 'PAYPAL-CERT-PEM' => $paypal . $middle,
		  'PAYPAL-TRANSMISSION-SIG' => $fv->sign('paypal', 'sha256', $signed) });

	# idem_wechatpay_decrypt: AES-256-GCM; the bad one has a ciphertext
	# byte changed, so its tag does not authenticate
	my $body = decode_json(psql_var($regress_sql, 'body'));
	my $resource = JSON::PP->new->utf8->canonical->encode($body->{resource});
	(my $bad_resource = $resource) =~ s/"ciphertext":"(.)/'"ciphertext":"' . ($1 eq 'A' ? 'B' : 'A')/e;
	$add->('decrypt', 'decrypt', psql_var($regress_sql, 'api_key'), $resource, $bad_resource,
		{});
	return @d;
}

# A SQL string literal (standard_conforming_strings on)
sub lit
{
	my $s = shift;
	$s =~ s/'/''/g;
	return "'$s'";
}

# SQL that creates the table deliveries(kind, scheme, secret, payload,
# headers, valid) and fills it with the deliveries
sub sql
{
	my @d = @_;
	my $json = JSON::PP->new->utf8->canonical;
	return "CREATE TABLE deliveries (kind text, scheme text, secret text, payload text,"
	  . " headers jsonb, valid boolean);\nINSERT INTO deliveries VALUES\n"
	  . join(",\n",
		map {
			'(' . join(', ', lit($_->{kind}), lit($_->{scheme}), lit($_->{secret}),
				lit($_->{payload}), lit($json->encode($_->{headers})),
				$_->{valid} ? 'true' : 'false') . ')'
		} @d)
	  . ";\n";
}

1;
