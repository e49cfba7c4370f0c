#!/usr/bin/perl
# Print SQL that creates and fills the table deliveries: a valid and an
# invalid delivery of each kind of key, signed now with fresh keys
# (Deliveries.pm).  Usage: make_deliveries.pl <work directory>
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use Deliveries;

die "usage: $0 <work directory>\n" unless @ARGV == 1;
binmode STDOUT;
print Deliveries::sql(
	Deliveries::make($ARGV[0], "$FindBin::RealBin/../regress/sql/webhook_wechatpay.sql"));
