#!/usr/bin/perl
# Prints the vectors of test/regress/sql/webhook_forms.sql (Alipay and UnionPay
# notifications), as psql \set lines to paste at the top of that file.
#
# Keys and certificates are made here, fresh, with the openssl command line
# (FormVectors.pm): test keys that sign nothing else.  The forms are built
# as the gateways' documentation and official SDKs describe them:
#
#   Alipay (asynchronous notification, AlipaySignature.rsaCheckV1): every
#   parameter but sign and sign_type, and but those with an empty value,
#   sorted by name, "k=v" joined by "&", in the form's charset; sign is the
#   base64 RSA signature, SHA256withRSA for sign_type RSA2, SHA1withRSA for
#   RSA.  The body is URL-encoded as Java's URLEncoder does it.
#
#   UnionPay (5.1.0 backend notification, the SDK's validate): every
#   parameter but signature, sorted, "k=v&..." with the decoded values; the
#   signature is the base64 SHA256withRSA of the lowercase hex SHA-256 of
#   that string; signPubKeyCert is the signer's certificate, which chains to
#   UnionPay's root through its intermediate and whose CN is
#   "...@中国银联股份有限公司@...".  The test authority here mimics that.
#
# Validity dates are fixed (2024 to 2124, and an expired and a future one),
# so the vectors keep working.  Also read by test/hostile/generate.pl.
#
# Usage: perl test/vectors/make_form_vectors.pl (needs openssl)
use strict;
use warnings;

use Encode qw(encode);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);

use lib dirname(__FILE__);
use FormVectors;

my $fv = FormVectors->new(tempdir(CLEANUP => 1));
my @out;

# A \set line
sub setvar
{
	my ($name, $value) = @_;
	push @out, FormVectors->psql_set($name, $value);
	return;
}

# ---- Alipay ---------------------------------------------------------------
$fv->rsa_key('alipay');
$fv->rsa_key('alipay_other');
$fv->ec_key('alipay_ec');
my $b64 = $fv->public_base64('alipay');
setvar('alipay_key', $fv->public_pem('alipay'));
setvar('alipay_key_b64', $b64);
# as pasted from a console that wraps it: lines of 64, some indented
setvar('alipay_key_b64_wrapped', join("\n  ", $b64 =~ /(.{1,64})/g) . "\n");
setvar('alipay_key_pkcs1', $fv->public_pkcs1_pem('alipay'));
setvar('alipay_key_other', $fv->public_pem('alipay_other'));
setvar('alipay_key_ec', $fv->public_pem('alipay_ec'));
setvar('alipay_cert', $fv->certificate(key => 'alipay', subject => '/CN=alipay key in a certificate',
	ext => 'signer_ext', start => '20240101000000Z', end => '21240101000000Z'));

# A TRADE_SUCCESS notification.  In the body's order (the signer sorts):
# a value with "+", "&", "=" and spaces, JSON, an empty parameter (left
# out of what is signed), and Zz_case, which sorts first bytewise but last
# without regard to case.
my @chinese = ('subject', "\x{6D4B}\x{8BD5}\x{5546}\x{54C1} idem");    # 测试商品 idem
my @alipay = (
	[ 'gmt_create', '2024-01-15 10:30:00' ], [ 'charset', 'utf-8' ],
	[ 'seller_email', 'merchant@example.com' ], [ 'subject', 'X' ],
	[ 'body', 'a+b & c=d, 100%' ], [ 'buyer_id', '2088102177846880' ],
	[ 'invoice_amount', '88.88' ], [ 'notify_id', '2024011500222103030012341234567890' ],
	[ 'fund_bill_list', '[{"amount":"88.88","fundChannel":"ALIPAYACCOUNT"}]' ],
	[ 'notify_type', 'trade_status_sync' ], [ 'trade_status', 'TRADE_SUCCESS' ],
	[ 'receipt_amount', '88.88' ], [ 'app_id', '2021000000000001' ],
	[ 'buyer_pay_amount', '88.88' ], [ 'seller_id', '2088102177649450' ],
	[ 'gmt_payment', '2024-01-15 10:30:05' ], [ 'notify_time', '2024-01-15 10:30:05' ],
	[ 'passback_params', '' ], [ 'version', '1.0' ], [ 'out_trade_no', '20240115000001' ],
	[ 'total_amount', '88.88' ], [ 'trade_no', '2024011522001446880501234567' ],
	[ 'auth_app_id', '2021000000000001' ], [ 'buyer_logon_id', 'buy***@example.com' ],
	[ 'Zz_case', 'sorted first' ], [ 'point_amount', '0.00' ]);

# The pairs with the subject in $charset and the charset parameter set
sub alipay_params
{
	my ($charset, $subject_bytes) = @_;
	return [ map {
			$_->[0] eq 'subject' ? [ 'subject', $subject_bytes ]
			  : $_->[0] eq 'charset' ? (defined $charset ? [ 'charset', $charset ] : ())
			  : $_
	} @alipay ];
}

my $utf8 = alipay_params('utf-8', encode('UTF-8', $chinese[1]));
setvar('alipay_form', $fv->alipay_form('alipay', 'RSA2', $utf8));
setvar('alipay_form_rsa', $fv->alipay_form('alipay', 'RSA', $utf8));
setvar('alipay_form_other_key', $fv->alipay_form('alipay_other', 'RSA2', $utf8));
setvar('alipay_form_no_charset',
	$fv->alipay_form('alipay', 'RSA2', alipay_params(undef, encode('UTF-8', $chinese[1]))));
setvar('alipay_form_charset_upper',
	$fv->alipay_form('alipay', 'RSA2', alipay_params('UTF-8', encode('UTF-8', $chinese[1]))));
setvar('alipay_form_charset_latin1',
	$fv->alipay_form('alipay', 'RSA2', alipay_params('ISO-8859-1', encode('UTF-8', $chinese[1]))));
# the RSA2 signature under sign_type RSA: the type picks the digest
setvar('alipay_form_rsa2_as_rsa', $fv->alipay_form('alipay', 'RSA2', $utf8, sign_type => 'RSA'));
# signed over other strings than the one Alipay signs
setvar('alipay_form_signed_with_sign_type', $fv->alipay_form('alipay', 'RSA2', $utf8,
	content => FormVectors::signed_string([ @$utf8, [ 'sign_type', 'RSA2' ] ], ['sign'], 1)));
setvar('alipay_form_signed_with_empty', $fv->alipay_form('alipay', 'RSA2', $utf8,
	content => FormVectors::signed_string($utf8, [ 'sign', 'sign_type' ], 0)));
setvar('alipay_form_signed_sorted_by_case', $fv->alipay_form('alipay', 'RSA2', $utf8,
	content => join('&', map { "$_->[0]=$_->[1]" }
		  sort { lc($a->[0]) cmp lc($b->[0]) } grep { $_->[1] ne '' } @$utf8)));

# for the handlers of doc/webhooks/alipay.md and unionpay.md: another
# application's notification, and the closing of an order left unpaid
my %change = (app_id => '2021000000000002');
setvar('alipay_form_other_app', $fv->alipay_form('alipay', 'RSA2',
	[ map { $change{ $_->[0] } ? [ $_->[0], $change{ $_->[0] } ] : $_ } @$utf8 ]));
%change = (trade_status => 'TRADE_CLOSED', out_trade_no => '20240115000002',
	notify_id => '2024011500222103030012341234567891');
setvar('alipay_form_closed', $fv->alipay_form('alipay', 'RSA2',
	[ map { $change{ $_->[0] } ? [ $_->[0], $change{ $_->[0] } ] : $_ } @$utf8 ]));

# GBK: the subject's bytes are GBK, %-encoded in the body
my $gbk = alipay_params('gbk', encode('GBK', $chinese[1]));
my $gbk_form = $fv->alipay_form('alipay', 'RSA2', $gbk);
setvar('alipay_form_gbk', $gbk_form);
# the same delivery, its subject not %-encoded: the characters as the
# database holds them (UTF-8 here), which must be taken back to GBK
my $subject_gbk = FormVectors::urlencode(encode('GBK', $chinese[1]));
my $subject_literal = encode('UTF-8', $chinese[1]) =~ s/ /+/gr;
(my $gbk_literal = $gbk_form) =~ s/\Q$subject_gbk\E/$subject_literal/ or die 'no subject';
setvar('alipay_form_gbk_literal', $gbk_literal);
# charset=gbk but signed over the UTF-8 bytes
setvar('alipay_form_gbk_signed_utf8', $fv->alipay_form('alipay', 'RSA2', $gbk,
	content => FormVectors::signed_string($utf8, [ 'sign', 'sign_type' ], 1) =~ s/charset=utf-8/charset=gbk/r));

# ---- UnionPay -------------------------------------------------------------
my %valid = (start => '20240101000000Z', end => '21240101000000Z');
my $company = "\x{4E2D}\x{56FD}\x{94F6}\x{8054}\x{80A1}\x{4EFD}\x{6709}\x{9650}\x{516C}\x{53F8}";    # 中国银联股份有限公司
my $signer_cn = encode('UTF-8', "/C=CN/O=idem test CFCA/OU=Enterprises/CN=041\@Z20240101\@$company\@00000001");
$fv->rsa_key($_) for qw(up_root up_middle up_signer up_other_root up_other);
my $root = $fv->certificate(key => 'up_root', subject => '/C=CN/O=idem test/CN=idem test UnionPay root',
	ext => 'ca_ext', %valid);
my $middle = $fv->certificate(key => 'up_middle', subject => '/C=CN/O=idem test/CN=idem test UnionPay OCA',
	issuer => 'up_root', ext => 'ca_ext', %valid);
my $signer = $fv->certificate(key => 'up_signer', subject => $signer_cn, issuer => 'up_middle',
	ext => 'signer_ext', %valid);
my $other_root = $fv->certificate(key => 'up_other_root', subject => '/C=CN/O=idem test/CN=another root',
	ext => 'ca_ext', %valid);
setvar('unionpay_root', $root);
setvar('unionpay_middle', $middle);
setvar('unionpay_signer', $signer);
setvar('unionpay_other_root', $other_root);

# The signer's key in certificates that must not be accepted, and two with
# extensions of their own
my %bad_certs = (
	expired => [ issuer => 'up_middle', start => '20200101000000Z', end => '20210101000000Z' ],
	future => [ issuer => 'up_middle', start => '21000101000000Z', end => '21240101000000Z' ],
	other_company => [ issuer => 'up_middle', %valid,
		subject => encode('UTF-8', "/C=CN/O=idem test/CN=041\@Z20240101\@\x{67D0}\x{67D0}\x{79D1}\x{6280}\x{6709}\x{9650}\x{516C}\x{53F8}\@00000001") ],
	cn_is_company => [ issuer => 'up_middle', %valid, subject => encode('UTF-8', "/C=CN/CN=$company") ],
	# the company in the first CN, another in the second
	two_cns => [ issuer => 'up_middle', %valid,
		subject => encode('UTF-8', "/C=CN/CN=041\@Z20240101\@$company\@00000001/CN=041\@Z20240101\@idem\@00000001") ],
	o_is_company => [ issuer => 'up_middle', %valid,
		subject => encode('UTF-8', "/C=CN/O=$company/CN=041\@Z20240101\@idem\@00000001") ],
	self_signed => [ %valid ],
	other_root => [ issuer => 'up_other_root', %valid ],
	odd => [ issuer => 'up_middle', %valid, ext => 'odd_ext' ],
	odd_critical => [ issuer => 'up_middle', %valid, ext => 'odd_critical_ext' ],
	# issued by the signer, which is no CA
	by_signer => [ issuer => 'up_signer', %valid ]);
my %certs;
for my $name (sort keys %bad_certs)
{
	my %o = (subject => $signer_cn, ext => 'signer_ext', @{ $bad_certs{$name} });
	$certs{$name} = $fv->certificate(key => 'up_signer', file => "cert_$name", %o);
}
# an intermediate that expired, and a signer under it
my $middle_expired = $fv->certificate(key => 'up_middle', file => 'middle_expired',
	subject => '/C=CN/O=idem test/CN=idem test UnionPay OCA', issuer => 'up_root', ext => 'ca_ext',
	start => '20200101000000Z', end => '20210101000000Z');
$certs{middle_expired} = $fv->certificate(key => 'up_signer', file => 'cert_middle_expired',
	subject => $signer_cn, issuer => 'middle_expired', issuer_key => 'up_middle', ext => 'signer_ext', %valid);
setvar('unionpay_middle_expired', $middle_expired);

# A consumption's backend notification (txnType 01), its reserved field in Chinese
my @unionpay = (
	[ 'accessType', '0' ], [ 'bizType', '000201' ], [ 'currencyCode', '156' ],
	[ 'encoding', 'UTF-8' ], [ 'merId', '777290058110048' ], [ 'orderId', '20240115000001' ],
	[ 'queryId', '792401151030051234567' ], [ 'reqReserved', encode('UTF-8', "\x{5907}\x{6CE8} a+b=c&d") ],
	[ 'respCode', '00' ], [ 'respMsg', 'success' ], [ 'settleAmt', '8888' ],
	[ 'settleCurrencyCode', '156' ], [ 'settleDate', '0115' ], [ 'signMethod', '01' ],
	[ 'traceNo', '123456' ], [ 'traceTime', '0115103005' ], [ 'txnAmt', '8888' ],
	[ 'txnSubType', '01' ], [ 'txnTime', '20240115103000' ], [ 'txnType', '01' ],
	[ 'version', '5.1.0' ]);

# The pairs with a parameter changed (undef: left out)
sub with
{
	my ($name, $value) = @_;
	my @p = grep { $_->[0] ne $name } @unionpay;
	push @p, [ $name, $value ] if defined $value;
	return \@p;
}

setvar('unionpay_form', $fv->unionpay_form('up_signer', $signer, \@unionpay));
setvar("unionpay_form_$_", $fv->unionpay_form('up_signer', $certs{$_}, \@unionpay)) for sort keys %certs;
setvar('unionpay_form_other_key', $fv->unionpay_form('up_other', $signer, \@unionpay));
setvar('unionpay_form_signed_raw', $fv->unionpay_form('up_signer', $signer, \@unionpay, raw => 1));
setvar('unionpay_form_version_500', $fv->unionpay_form('up_signer', $signer, with('version', '5.0.0')));
setvar('unionpay_form_sign_method_11', $fv->unionpay_form('up_signer', $signer, with('signMethod', '11')));
setvar('unionpay_form_no_sign_method', $fv->unionpay_form('up_signer', $signer, with('signMethod', undef)));
setvar('unionpay_form_empty_value', $fv->unionpay_form('up_signer', $signer, with('reserved', '')));
setvar('unionpay_form_no_cert', $fv->unionpay_form('up_signer', undef, \@unionpay));
setvar('unionpay_form_cert_and_middle', $fv->unionpay_form('up_signer', $signer . $middle, \@unionpay));
# the hex of the hash in capitals is another string
setvar('unionpay_form_upper_hex', $fv->unionpay_form('up_signer', $signer, \@unionpay,
	raw => 1, content => uc($fv->sha256_hex(FormVectors::signed_string(
		[ @unionpay, [ 'signPubKeyCert', $signer ] ], ['signature'], 0)))));

print "-- generated by test/vectors/make_form_vectors.pl; do not edit by hand\n";
print "$_\n" for @out;
print "-- end of generated vectors\n";
