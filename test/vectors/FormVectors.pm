# Signed gateway forms made with the openssl command line, independently of
# idem: RSA and Ed25519 keys, a small certificate authority (openssl ca),
# and Alipay's and UnionPay's notifications signed as their documentation
# and official SDKs describe them.  Used by make_form_vectors.pl (the fixed
# vectors of test/regress/sql/webhook_forms.sql), by
# test/tap/core/108_gateway_forms.pl (fresh keys and certificates at test
# time) and by Deliveries.pm (a delivery of every kind of key, for the
# memory test and bench/verify.sh).
#
#   my $fv = FormVectors->new($dir);        # works in $dir, which it fills
#   $fv->rsa_key('alipay');                  # $dir/alipay.key
#   my $pem = $fv->public_pem('alipay');
#   my $body = $fv->alipay_form('alipay', 'RSA2', \@params);
#
# Parameters are lists of [name, value] pairs of bytes (a value already in
# the form's charset), in the order they go into the body.
package FormVectors;

use strict;
use warnings;

use File::Path qw(make_path);
use MIME::Base64 qw(encode_base64);

# A work directory of key and certificate files
sub new
{
	my ($class, $dir) = @_;
	make_path($dir);
	my $self = bless { dir => $dir, serial => 1 }, $class;
	$self->_ca_config;
	return $self;
}

# A psql \set line giving $value to variable $name: backslashes and quotes
# doubled, newlines as \n
sub psql_set
{
	my ($class, $name, $value) = @_;
	$value =~ s/\\/\\\\/g;
	$value =~ s/'/''/g;
	$value =~ s/\n/\\n/g;
	return "\\set $name '$value'";
}

# Run a command and return its standard output; die with its standard
# error if it fails (which is kept quiet otherwise)
sub run
{
	my ($self, @cmd) = @_;
	my $errfile = "$self->{dir}/stderr";
	open(my $saved, '>&', \*STDERR) or die "cannot save stderr: $!";
	open(STDERR, '>', $errfile) or die "$errfile: $!";
	my $ok = open(my $fh, '-|', @cmd);
	my $out = '';
	if ($ok)
	{
		binmode $fh;
		local $/;
		$out = <$fh> // '';
		$ok = close($fh);
	}
	open(STDERR, '>&', $saved) or die "cannot restore stderr: $!";
	die "failed: @cmd\n" . $self->slurp($errfile) unless $ok;
	return $out;
}

# Write bytes to a file of the work directory and return its path
sub file
{
	my ($self, $name, $bytes) = @_;
	my $path = "$self->{dir}/$name";
	open(my $fh, '>:raw', $path) or die "$path: $!";
	print $fh $bytes;
	close($fh);
	return $path;
}

# A file's bytes
sub slurp
{
	my ($self, $path) = @_;
	open(my $fh, '<:raw', $path) or die "$path: $!";
	local $/;
	my $bytes = <$fh>;
	close($fh);
	return $bytes;
}

# A new RSA key pair $name (2048 bits unless told)
sub rsa_key
{
	my ($self, $name, $bits) = @_;
	$self->run('openssl', 'genpkey', '-algorithm', 'RSA', '-pkeyopt',
		'rsa_keygen_bits:' . ($bits // 2048), '-out', "$self->{dir}/$name.key");
	return "$self->{dir}/$name.key";
}

# A new P-256 key pair $name (a key of another type than RSA)
sub ec_key
{
	my ($self, $name) = @_;
	$self->run('openssl', 'genpkey', '-algorithm', 'EC', '-pkeyopt',
		'ec_paramgen_curve:P-256', '-out', "$self->{dir}/$name.key");
	return "$self->{dir}/$name.key";
}

# A new Ed25519 key pair $name
sub ed25519_key
{
	my ($self, $name) = @_;
	$self->run('openssl', 'genpkey', '-algorithm', 'ED25519', '-out', "$self->{dir}/$name.key");
	return "$self->{dir}/$name.key";
}

# The raw 32 bytes of the Ed25519 public key $name, in base64 (the end of
# its SubjectPublicKeyInfo)
sub ed25519_public_base64
{
	my ($self, $name) = @_;
	my $der = $self->run('openssl', 'pkey', '-in', "$self->{dir}/$name.key", '-pubout',
		'-outform', 'DER');
	return encode_base64(substr($der, -32), '');
}

# Base64 of the Ed25519 signature of $data by key $name
sub ed25519_sign
{
	my ($self, $name, $data) = @_;
	my $in = $self->file('to_sign', $data);
	my $sig = $self->run('openssl', 'pkeyutl', '-sign', '-inkey', "$self->{dir}/$name.key",
		'-rawin', '-in', $in);
	return encode_base64($sig, '');
}

# The serial number of the certificate file $dir/$name.pem, in hex
sub serial
{
	my ($self, $name) = @_;
	my $out = $self->run('openssl', 'x509', '-in', "$self->{dir}/$name.pem", '-serial', '-noout');
	$out =~ /^serial=([0-9A-F]+)$/m or die "no serial in $out";
	return $1;
}

# The public key of $name: PEM SubjectPublicKeyInfo ("PUBLIC KEY")
sub public_pem
{
	my ($self, $name) = @_;
	return $self->run('openssl', 'pkey', '-in', "$self->{dir}/$name.key", '-pubout');
}

# The public key of $name as the Alipay console shows it: the base64 of the
# DER SubjectPublicKeyInfo, on one line
sub public_base64
{
	my ($self, $name) = @_;
	my $der = $self->run('openssl', 'pkey', '-in', "$self->{dir}/$name.key", '-pubout',
		'-outform', 'DER');
	return encode_base64($der, '');
}

# The public key of $name in PKCS#1 ("RSA PUBLIC KEY")
sub public_pkcs1_pem
{
	my ($self, $name) = @_;
	return $self->run('openssl', 'rsa', '-in', "$self->{dir}/$name.key", '-RSAPublicKey_out');
}

# Base64 of the RSA PKCS#1 v1.5 signature of $data by key $name, digest
# $md (sha256 or sha1), as openssl dgst -sign makes it
sub sign
{
	my ($self, $name, $md, $data) = @_;
	my $in = $self->file('to_sign', $data);
	my $sig = $self->run('openssl', 'dgst', "-$md", '-sign', "$self->{dir}/$name.key", $in);
	return encode_base64($sig, '');
}

# Lowercase hex SHA-256 of $data, from openssl dgst
sub sha256_hex
{
	my ($self, $data) = @_;
	my $in = $self->file('to_hash', $data);
	my ($hex) = split / /, $self->run('openssl', 'dgst', '-sha256', '-r', $in);
	return $hex;
}

# The configuration of the test certificate authority (openssl ca): any
# subject, UTF-8 strings, extensions by section
sub _ca_config
{
	my ($self) = @_;
	my $d = $self->{dir};
	make_path("$d/newcerts");
	$self->file('index.txt', '');
	$self->file('config', <<"EOC");
[ca]
default_ca = test_ca

[test_ca]
database = $d/index.txt
new_certs_dir = $d/newcerts
serial = $d/serial
default_md = sha256
policy = any_subject
unique_subject = no
email_in_dn = no
preserve = yes

[any_subject]
countryName = optional
organizationName = optional
organizationalUnitName = optional
commonName = supplied

[req]
distinguished_name = dn
string_mask = utf8only
prompt = no

[dn]
CN = unused

[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always

[signer_ext]
basicConstraints = CA:FALSE
keyUsage = digitalSignature,nonRepudiation
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid

[odd_ext]
basicConstraints = CA:FALSE
keyUsage = digitalSignature,nonRepudiation
1.3.6.1.4.1.55555.1 = ASN1:UTF8String:an extension nobody knows
nsComment = "idem test"

[odd_critical_ext]
basicConstraints = CA:FALSE
keyUsage = digitalSignature,nonRepudiation
1.3.6.1.4.1.55555.1 = critical,ASN1:UTF8String:a critical extension nobody knows
EOC
	return;
}

# A certificate (PEM) for key $name with subject $subject (openssl's
# "/CN=..." form, UTF-8), issued by the certificate and key $issuer (undef:
# self-signed; the key may be another, $issuer_key), with the extensions of section $ext, valid from $start to
# $end (YYYYMMDDHHMMSSZ); also written to $dir/$name.pem unless $file says
# another name
sub certificate
{
	my ($self, %o) = @_;
	my $d = $self->{dir};
	my $out = $o{file} // $o{key};
	$self->file('serial', sprintf("%04X\n", $self->{serial}++));
	$self->run('openssl', 'req', '-new', '-config', "$d/config", '-utf8', '-key',
		"$d/$o{key}.key", '-subj', $o{subject}, '-out', "$d/$out.csr");
	$self->run(
		'openssl', 'ca', '-batch', '-config', "$d/config", '-utf8', '-notext',
		'-in', "$d/$out.csr", '-out', "$d/$out.pem",
		'-extensions', $o{ext}, '-startdate', $o{start}, '-enddate', $o{end},
		defined $o{issuer}
		? ('-cert', "$d/$o{issuer}.pem", '-keyfile', "$d/" . ($o{issuer_key} // $o{issuer}) . '.key')
		: ('-selfsign', '-keyfile', "$d/$o{key}.key"));
	return $self->slurp("$d/$out.pem");
}

# application/x-www-form-urlencoded, as Java's URLEncoder writes it (and
# so the gateways): letters, digits and .-*_ as they are, space as +, every
# other byte %XX
sub urlencode
{
	my ($bytes) = @_;
	$bytes =~ s/([^A-Za-z0-9.\-*_ ])/sprintf('%%%02X', ord($1))/ge;
	$bytes =~ tr/ /+/;
	return $bytes;
}

# The body of a form of [name, value] pairs, in their order
sub form_body
{
	my ($params) = @_;
	return join('&', map { urlencode($_->[0]) . '=' . urlencode($_->[1]) } @$params);
}

# "k=v&k=v" of the pairs sorted by name, bytewise, leaving out the names
# of $skip and, when $skip_empty, the empty values
sub signed_string
{
	my ($params, $skip, $skip_empty) = @_;
	my %skip = map { $_ => 1 } @$skip;
	return join('&',
		map { "$_->[0]=$_->[1]" }
		sort { $a->[0] cmp $b->[0] }
		grep { !$skip{ $_->[0] } && !($skip_empty && $_->[1] eq '') } @$params);
}

# An Alipay notification: the pairs, then sign_type and sign, signed by key
# $name (sign_type RSA2: SHA256withRSA, RSA: SHA1withRSA) over every pair
# but sign and sign_type with a value.  %o: sign_type to put in the form
# instead, content to sign instead.
sub alipay_form
{
	my ($self, $name, $sign_type, $params, %o) = @_;
	my $content = $o{content} // signed_string($params, [ 'sign', 'sign_type' ], 1);
	my $sign = $self->sign($name, $sign_type eq 'RSA' ? 'sha1' : 'sha256', $content);
	return form_body([ @$params, [ 'sign_type', $o{sign_type} // $sign_type ], [ 'sign', $sign ] ]);
}

# A UnionPay 5.1.0 notification: the pairs, then signPubKeyCert ($cert,
# PEM) and signature, by key $name: SHA256withRSA of the lowercase hex
# SHA-256 of every pair but signature.  %o: content to sign instead, raw
# (sign it as it is, not its hash's hex).
sub unionpay_form
{
	my ($self, $name, $cert, $params, %o) = @_;
	my @all = (@$params, defined $cert ? ([ 'signPubKeyCert', $cert ]) : ());
	my $content = $o{content} // signed_string(\@all, ['signature'], 0);
	my $signed = $o{raw} ? $content : $self->sha256_hex($content);
	return form_body([ @all, [ 'signature', $self->sign($name, 'sha256', $signed) ] ]);
}

1;
