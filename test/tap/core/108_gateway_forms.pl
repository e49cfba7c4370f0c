# The form-based gateways of idem_webhook_verify (alipay, unionpay) with
# keys and certificates made at test time by the openssl command line
# (test/vectors/FormVectors.pm), where test/regress/sql/webhook_forms.sql uses fixed
# ones: certificates valid around the real clock (an hour either way, one
# that ended a minute ago, one that starts in an hour); forms of close to
# the most parameters a form may have, verified fast (the decoder sorts
# once); and databases in other encodings than UTF-8, where characters
# sent unencoded are converted to the form's charset (EUC_CN to GBK goes
# through UTF-8), and a character the charset lacks is false, not an error.
use strict;
use warnings;

use Encode qw(encode);
use POSIX qw(strftime);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use lib "$FindBin::RealBin/../../vectors";
use IdemTest;
use FormVectors;

my $node = idem_node('gateway_forms', q(
log_statement = none
), extra => [ '--encoding=UTF8', '--no-locale' ]);
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

my $fv = FormVectors->new($node->basedir . '/forms');

# A SQL string literal (standard_conforming_strings is on)
sub lit
{
	my $s = shift;
	$s =~ s/'/''/g;
	return "'$s'";
}

# idem_webhook_verify's answer, in database $db (default postgres); the
# text is sent as UTF-8
sub verify
{
	my ($scheme, $secret, $payload, $db) = @_;
	return $node->safe_psql($db // 'postgres',
		"SET client_encoding = 'UTF8'; SELECT idem_webhook_verify('$scheme', "
		  . lit($secret) . ', ' . lit($payload) . ", '{}')");
}

# An Alipay notification's pairs, with more pairs after them
sub alipay_params
{
	my ($charset, $subject, @more) = @_;
	return [
		[ 'app_id', '2021000000000001' ], [ 'charset', $charset ],
		[ 'notify_id', 'n-' . int(rand(1e9)) ], [ 'out_trade_no', 'order-1' ],
		[ 'subject', $subject ], [ 'total_amount', '12.30' ],
		[ 'trade_status', 'TRADE_SUCCESS' ], @more ];
}

# --- fresh keys -------------------------------------------------------------

$fv->rsa_key('alipay');
$fv->rsa_key('alipay_other');
my $key = $fv->public_pem('alipay');
my $params = alipay_params('utf-8', 'idem');
is(verify('alipay', $key, $fv->alipay_form('alipay', 'RSA2', $params)), 't', 'alipay: RSA2 with a fresh key');
is(verify('alipay', $fv->public_base64('alipay'), $fv->alipay_form('alipay', 'RSA', $params)),
	't', 'alipay: RSA (SHA1) with a fresh key, given as bare base64');
is(verify('alipay', $fv->public_pem('alipay_other'), $fv->alipay_form('alipay', 'RSA2', $params)),
	'f', 'alipay: another key');

# --- certificates and the clock ----------------------------------------------

# A time $secs from now as openssl ca takes it
sub at { return strftime('%Y%m%d%H%M%SZ', gmtime(time() + $_[0])); }

my $company = encode('UTF-8', "\x{4E2D}\x{56FD}\x{94F6}\x{8054}\x{80A1}\x{4EFD}\x{6709}\x{9650}\x{516C}\x{53F8}");
my $signer_subject = "/C=CN/O=idem test/CN=041\@Z1\@$company\@00000001";
$fv->rsa_key($_) for qw(root middle signer);
my $root = $fv->certificate(key => 'root', subject => '/CN=idem test root', ext => 'ca_ext',
	start => at(-86400), end => at(86400 * 365));
my $middle = $fv->certificate(key => 'middle', subject => '/CN=idem test middle', issuer => 'root',
	ext => 'ca_ext', start => at(-86400), end => at(86400 * 365));
my $chain = $root . $middle;
my @unionpay = (
	[ 'encoding', 'UTF-8' ], [ 'merId', '777290058110048' ], [ 'orderId', 'order-1' ],
	[ 'queryId', '1234' ], [ 'respCode', '00' ], [ 'signMethod', '01' ],
	[ 'txnAmt', '1230' ], [ 'txnType', '01' ], [ 'version', '5.1.0' ]);
for my $case (
	[ 'valid from an hour ago to an hour from now', -3600, 3600, 't' ],
	[ 'that ended a minute ago', -86400, -60, 'f' ],
	[ 'that starts in an hour', 3600, 86400, 'f' ])
{
	my ($what, $from, $to, $expect) = @$case;
	my $cert = $fv->certificate(key => 'signer', file => "signer_$from", subject => $signer_subject,
		issuer => 'middle', ext => 'signer_ext', start => at($from), end => at($to));
	is(verify('unionpay', $chain, $fv->unionpay_form('signer', $cert, \@unionpay)),
		$expect, "unionpay: a signing certificate $what");
}
my $signer = $fv->certificate(key => 'signer', subject => $signer_subject, issuer => 'middle',
	ext => 'signer_ext', start => at(-3600), end => at(86400));

# --- many parameters: sorted once, so fast ---------------------------------

# Seconds idem_webhook_verify takes, measured in the server, and its answer
$node->safe_psql('postgres', q{
CREATE FUNCTION timed_verify(scheme text, secret text, payload text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    ok boolean := idem_webhook_verify(scheme, secret, payload, '{}');
BEGIN
    RETURN ok || ' ' || round(extract(epoch FROM clock_timestamp() - t0), 3);
END $$});
sub timed
{
	my ($scheme, $secret, $payload) = @_;
	my ($ok, $secs) = split / /, $node->safe_psql('postgres',
		"SELECT timed_verify('$scheme', " . lit($secret) . ', ' . lit($payload) . ')');
	return ($ok, $secs);
}

# 99,980 parameters more, in random order (a form may have 100,000 pieces)
my @many = map { [ sprintf('p%06d', $_), "v$_" ] } 1 .. 99_980;
for (my $i = $#many; $i > 0; $i--)
{
	my $j = int(rand($i + 1));
	@many[ $i, $j ] = @many[ $j, $i ];
}
my $big = $fv->alipay_form('alipay', 'RSA2', alipay_params('utf-8', 'idem', @many));
my ($ok, $secs) = timed('alipay', $key, $big);
is($ok, 'true', 'alipay: a form of 99,989 parameters verifies');
cmp_ok($secs, '<', 3, "alipay: and in less than 3 seconds ($secs)");
# empty ones, which are not signed: only the limit makes it false
($ok, $secs) = timed('alipay', $key, $big . join('', map { "&x$_=" } 1 .. 20));
is($ok, 'false', "alipay: more than 100,000 parameters is false ($secs s)");

my $big_up = $fv->unionpay_form('signer', $signer, [ @unionpay, @many ]);
($ok, $secs) = timed('unionpay', $chain, $big_up);
is($ok, 'true', 'unionpay: a form of 99,991 parameters verifies');
cmp_ok($secs, '<', 3, "unionpay: and in less than 3 seconds ($secs)");

# --- other database encodings ---------------------------------------------

# The subject 测试商品 idem: %-encoded GBK in one form, and in another as
# characters, unencoded, in the body as the database holds it
my $subject = "\x{6D4B}\x{8BD5}\x{5546}\x{54C1} idem";
my $gbk_params = alipay_params('gbk', encode('GBK', $subject));
my $gbk_form = $fv->alipay_form('alipay', 'RSA2', $gbk_params);
my $encoded = FormVectors::urlencode(encode('GBK', $subject));
(my $gbk_literal = $gbk_form) =~ s/\Q$encoded\E/encode('UTF-8', $subject) =~ s! !+!r/e or die;
my $utf8_form = $fv->alipay_form('alipay', 'RSA2', alipay_params('utf-8', encode('UTF-8', $subject)));
$encoded = FormVectors::urlencode(encode('UTF-8', $subject));
(my $utf8_literal = $utf8_form) =~ s/\Q$encoded\E/encode('UTF-8', $subject) =~ s! !+!r/e or die;
# café in a UTF-8 form, unencoded: a LATIN1 character converted to UTF-8
my $cafe = encode('UTF-8', "caf\x{E9}");
my $latin_form = $fv->alipay_form('alipay', 'RSA2', alipay_params('utf-8', $cafe));
(my $latin_literal = $latin_form) =~ s/caf%C3%A9/$cafe/ or die;
# a character GBK lacks, unencoded in a GBK form, and in a UTF-8 one
my $emoji = encode('UTF-8', "\x{1F600}");
my $emoji_form = $fv->alipay_form('alipay', 'RSA2', alipay_params('gbk', 'x'));
(my $emoji_literal = $emoji_form) =~ s/subject=x/subject=$emoji/ or die;
my $emoji_utf8 = $fv->alipay_form('alipay', 'RSA2', alipay_params('utf-8', $emoji));
$emoji_utf8 =~ s/subject=%F0%9F%98%80/subject=$emoji/ or die;

for my $enc ('EUC_CN', 'LATIN1', 'SQL_ASCII')
{
	my $db = lc("db_$enc");
	$node->safe_psql('postgres',
		"CREATE DATABASE $db ENCODING '$enc' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
	$node->safe_psql($db, 'CREATE EXTENSION idem');
}
is(verify('alipay', $key, $gbk_form, 'db_euc_cn'), 't', 'EUC_CN database: GBK form, %-encoded');
is(verify('alipay', $key, $gbk_literal, 'db_euc_cn'), 't',
	'EUC_CN database: GBK form, characters unencoded (EUC_CN to GBK through UTF-8)');
is(verify('alipay', $key, $utf8_literal, 'db_euc_cn'), 't',
	'EUC_CN database: UTF-8 form, characters unencoded');
is(verify('alipay', $key, $latin_literal, 'db_latin1'), 't',
	'LATIN1 database: UTF-8 form, an accented letter unencoded');
is(verify('alipay', $key, $utf8_literal, 'db_sql_ascii'), 't',
	'SQL_ASCII database: UTF-8 form, bytes unencoded taken as they are');
is(verify('alipay', $key, $gbk_literal, 'postgres'), 't', 'UTF8 database: GBK form, characters unencoded');
is(verify('alipay', $key, $emoji_literal, 'postgres'), 'f',
	'UTF8 database: a character GBK lacks is false, not an error');
is(verify('alipay', $key, $emoji_utf8, 'postgres'), 't',
	'UTF8 database: the same character unencoded in a UTF-8 form');

# UnionPay in an EUC_CN database: the certificate's CN is read as UTF-8
# whatever the database encoding
is(verify('unionpay', $chain, $fv->unionpay_form('signer', $signer, \@unionpay), 'db_euc_cn'),
	't', 'EUC_CN database: unionpay');

ok(!$node->log_contains('TRAP:|terminated by signal'), 'no assertion failed, no backend crashed');
$node->stop;
done_testing();
