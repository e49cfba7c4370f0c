#!/bin/sh
# Make the SQL edition's two scripts from src/*.sql, in name order:
#   idem_sql--VERSION.sql  the extension's script (CREATE EXTENSION idem_sql,
#                          from files or through pg_tle)
#   idem_sql.sql           the same as a plain script, for psql -f by the
#                          database's owner, in one transaction
# A line of src/ that ends in "-- extension only" is left out of the plain
# script (pg_extension_config_dump, which works only inside CREATE
# EXTENSION).  Usage: build.sh [OUTDIR] (default: this directory).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$here/idem_sql.control")
ext=$out/idem_sql--$version.sql
plain=$out/idem_sql.sql
{
	echo "/* idem_sql--$version.sql: made by idem_sql/build.sh from idem_sql/src/ */"
	echo ""
	echo "-- complain if script is sourced in psql, rather than via CREATE EXTENSION"
	# printf, not echo: sh's echo (dash's) reads \e as an escape
	printf '%s\n' '\echo Use "CREATE EXTENSION idem_sql" to load this file (or run idem_sql.sql). \quit'
	for f in "$here"/src/*.sql; do
		echo ""
		echo "-- $(basename "$f")"
		cat "$f"
	done
} >"$ext.tmp"
{
	echo "/* idem_sql.sql, version $version: made by idem_sql/build.sh from idem_sql/src/."
	echo "   The SQL edition of idem as a plain script: run it as the database's owner,"
	echo "   psql -v ON_ERROR_STOP=1 -1 -f idem_sql.sql */"
	for f in "$here"/src/*.sql; do
		echo ""
		echo "-- $(basename "$f")"
		grep -v -- '-- extension only$' "$f"
	done
} >"$plain.tmp"
mv "$ext.tmp" "$ext"
mv "$plain.tmp" "$plain"
