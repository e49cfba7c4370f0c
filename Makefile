# idem: build with PGXS.  `make demo` and `make test` set up everything they need.
EXTENSION = idem

MODULE_big = idem
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/webhook/*.c)))
DATA = $(sort $(wildcard idem--*.sql))

# make installcheck runs three kinds of tests, each against servers of its
# own started from the binaries in $(bindir) (pg_config's, where make
# install put idem; test/run.sh passes its private tree's):
#   pg_regress            test/regress/sql/*.sql with test/regress/expected/
#   pg_isolation_regress  test/isolation/specs/*.spec with
#                         test/isolation/expected/
#   prove                 test/tap/{core,recovery,components}/*.pl, helpers in
#                         test/tap/lib (PROVE_TESTS=test/tap/core/NNN_x.pl
#                         picks some; test/tap/sql/ is the SQL edition's)
# The regression and isolation servers run with test/idem.conf (idem
# preloaded, as pg_cron's tests do).  Outputs, servers and logs go below
# IDEM_BUILD: regress/, isolation/, tap/.  The SQL edition's runs
# (test/run.sh on a -sql flavour) set the IDEM_* variables below: the tests
# copied with the extension's name mapped, test/idem_sql.conf, and
# --load-extension=pgcrypto; and test/tap/sql/*.pl for the TAP files.
IDEM_BUILD ?= $(CURDIR)/tmp_check
IDEM_REGRESS_DIR ?= ./test/regress
IDEM_ISOLATION_DIR ?= ./test/isolation
IDEM_TEST_CONF ?= ./test/idem.conf
IDEM_REGRESS_EXTRA ?=
REGRESS = $(sort $(basename $(notdir $(wildcard test/regress/sql/*.sql))))
REGRESS_OPTS = --inputdir=$(IDEM_REGRESS_DIR) --temp-instance=$(IDEM_BUILD)/regress-instance \
	--outputdir=$(IDEM_BUILD)/regress --temp-config=$(IDEM_TEST_CONF) $(IDEM_REGRESS_EXTRA)
ISOLATION = $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=$(IDEM_ISOLATION_DIR) --outputdir=$(IDEM_BUILD)/isolation \
	--temp-instance=$(IDEM_BUILD)/isolation-instance --temp-config=$(IDEM_TEST_CONF) \
	$(IDEM_REGRESS_EXTRA)
TAP_TESTS = 1

PG_CONFIG ?= pg_config
PG_CPPFLAGS = -I$(srcdir)/src
# IDEM_ASSERT=1 (make test sets it) turns idem's own Assert()s on, against a
# server built without them.
ifdef IDEM_ASSERT
PG_CPPFLAGS += -DUSE_ASSERT_CHECKING
endif
# Signatures, keys and certificates: OpenSSL's libcrypto, which the server
# itself is built with (libssl-dev).
SHLIB_LINK = -lcrypto
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers $(if $(CI),-Werror)
EXTRA_CLEAN = tmp_check results regression.diffs regression.out output_iso src/.flavour

PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifeq ($(PGXS),)
# No server headers yet: only the set-up targets below can run.
all install installcheck:
	@echo "postgresql-server-dev is not installed: run 'make test' or 'make demo', which install it" >&2; exit 1
else
include $(PGXS)
endif

# After PGXS, so that its "all" stays the default goal.  PGXS tracks no
# header dependencies: every object depends on every header, and on the
# flavour.
$(OBJS) $(OBJS:.o=.bc): $(wildcard src/*.h src/webhook/*.h) src/.flavour

# src/.flavour names the flavour asked for (assert or release) and the
# server built against.  Its recipe runs on every build but rewrites the
# file, which makes it newer than every object, only when that changes: a
# build with IDEM_ASSERT=1 after one without it, or with PG_CONFIG=... for
# another server, compiles everything again.
src/.flavour: FORCE
	@f="$(if $(IDEM_ASSERT),assert,release) `$(PG_CONFIG) --version`" && \
	{ echo "$$f" | cmp -s - $@ || echo "$$f" >$@; }
# Phony: PGXS's .SECONDARY would otherwise let a FORCE that does not exist
# leave src/.flavour alone.
.PHONY: FORCE

# pg_regress makes its --temp-instance directories, but not their parent.
installcheck: | $(IDEM_BUILD)
$(IDEM_BUILD):
	@mkdir -p $@

# The TAP files of the C edition, run when PROVE_TESTS names none
IDEM_TAP_DEFAULT = $(sort $(wildcard test/tap/components/*.pl test/tap/core/*.pl test/tap/recovery/*.pl))

# PGXS's prove_installcheck, for idem's layout: the TAP files are in
# test/tap/core, recovery and components, their helpers in test/tap/lib
# (on prove's path, and on each file's own through FindBin), TESTDIR is
# $(IDEM_BUILD)/tap (and the data and logs, which the test library of 17
# on puts where TESTDATADIR and TESTLOGDIR say, are below it on every
# version), and instead of emptying all of tmp_check (where test/run.sh
# keeps its private server tree) it removes only what an earlier run of the
# same files left: data directories (the test library refuses to reuse
# them) and logs (server logs are appended to, and tests read them).
define prove_installcheck
echo "+++ tap install-check +++" && \
cd $(srcdir) && \
$(MKDIR_P) '$(IDEM_BUILD)/tap' && \
for t in $(or $(PROVE_TESTS),$(IDEM_TAP_DEFAULT)); do \
	n=`basename $$t .pl`; \
	rm -rf '$(IDEM_BUILD)'/tap/tmp_check/t_$${n}_*_data \
		'$(IDEM_BUILD)'/tap/tmp_check/log/regress_log_$$n \
		'$(IDEM_BUILD)'/tap/tmp_check/log/$${n}_*.log; \
done && \
   TESTDIR='$(IDEM_BUILD)/tap' TESTDATADIR='$(IDEM_BUILD)/tap/tmp_check' \
   TESTLOGDIR='$(IDEM_BUILD)/tap/tmp_check/log' PATH="$(bindir):$$PATH" PGPORT='6$(DEF_PGPORT)' \
   PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
   $(PROVE) $(PG_PROVE_FLAGS) -I test/tap/lib $(PROVE_FLAGS) $(or $(PROVE_TESTS),$(IDEM_TAP_DEFAULT))
endef

# deps: install the packages that are missing; test: every test against
# scratch servers (CI=1 makes warnings errors); demo: see README.md;
# bench, bench-verify, bench-seeds, bench-profile, bench-instructions,
# bench-wal, bench-scale, bench-upgrade, soak: see doc/performance.md.
# test-matrix: the same suite on every server of test/servers.sh (PG=...
# picks one for test and bench).  fuzz: the fuzz targets of test/fuzz,
# FUZZ_SECONDS each (default 60; see test/fuzz/README).  Each runs its
# script, which reads CI, PG and FUZZ_* from the environment, where make
# puts them when they are given on its command line.
.PHONY: test test-matrix demo deps bench bench-verify bench-seeds bench-profile bench-instructions bench-wal bench-scale bench-upgrade soak fuzz
deps:
	@bash test/deps.sh
test:
	@bash test/run.sh
test-matrix:
	@bash test/matrix.sh
demo:
	@bash test/demo.sh
bench:
	@bash bench/run.sh
bench-verify:
	@bash bench/verify.sh
bench-seeds:
	@bash bench/seeds/run.sh
bench-profile:
	@bash bench/profile.sh
bench-instructions:
	@bash bench/instructions.sh
bench-wal:
	@bash bench/wal.sh
bench-scale:
	@bash bench/scale.sh
bench-upgrade:
	@bash bench/upgrade.sh
soak:
	@bash bench/soak.sh
fuzz:
	@bash test/fuzz/run.sh
