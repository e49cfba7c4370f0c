# idem: build with PGXS.  `make demo` and `make test` set up everything they need.
EXTENSION = idem
EXTVERSION = 1.3

MODULE_big = idem
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
DATA = $(sort $(wildcard idem--*.sql))

# pg_regress: sql/ and expected/; isolation specs: test/specs and test/expected.
# Both start their own server with idem preloaded (as pg_cron does).
REGRESS = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --temp-instance=./tmp_check/regress --temp-config=./test/idem.conf
ISOLATION = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=./test --outputdir=./tmp_check/isolation_out \
	--temp-instance=./tmp_check/isolation --temp-config=./test/idem.conf

PG_CONFIG ?= pg_config
PG_CPPFLAGS = -I$(srcdir)/src
# IDEM_ASSERT=1 (make test sets it) turns idem's own Assert()s on, against a
# server built without them.  src/.flavour names the flavour asked for; it
# is rewritten (and so newer than every object) only when that changes.
FLAVOUR := $(if $(IDEM_ASSERT),assert,release)
$(shell test "$$(cat src/.flavour 2>/dev/null)" = "$(FLAVOUR)" || echo "$(FLAVOUR)" >src/.flavour)
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
$(OBJS) $(OBJS:.o=.bc): $(wildcard src/*.h) src/.flavour

# pg_regress makes its --temp-instance directories, but not their parent.
installcheck: | tmp_check
tmp_check:
	@mkdir -p $@

# deps: install the packages that are missing; test: every test against
# scratch servers (CI=1 makes warnings errors); demo: see README.md;
# bench, bench-verify: see doc/performance.md.
.PHONY: test demo deps bench bench-verify
deps:
	@bash test/deps.sh
test:
	@CI="$(CI)" bash test/run.sh
demo:
	@bash test/demo.sh
bench:
	@bash bench/run.sh
bench-verify:
	@bash bench/verify.sh
