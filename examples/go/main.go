// The example payment service in Go: POST /payments with an Idempotency-Key
// header books a payment once, however often the request is retried.  The
// claim, the INSERT and the stored response commit or roll back together.
//
// net/http, encoding/json and pgx v4 with its pool (pgxpool).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v4/pgxpool"
)

// The request, with the two test knobs: DelayMs (a slow gateway) and Fail
type request struct {
	Account  string
	Amount   string // the amount as given: 100.50 stays 100.50
	Currency string
	DelayMs  int
	Fail     bool
}

// A request that is not a payment: the detail, and the field at fault
type invalid struct{ detail, field string }

// The checks of a payment request, the same in every example service
var (
	amountText   = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]{1,2})?$`)
	nonZero      = regexp.MustCompile(`[1-9]`)
	currencyText = regexp.MustCompile(`^[A-Z]{3}$`)
	delayText    = regexp.MustCompile(`^(0|[1-9][0-9]{0,4})$`)
)

// The payment request in body, checked field by field
func validate(body []byte) (req request, bad *invalid) {
	var fields map[string]json.RawMessage // each member's JSON text
	if !utf8.Valid(body) || json.Unmarshal(body, &fields) != nil || fields == nil {
		return req, &invalid{"the body must be a JSON object", ""}
	}
	if json.Unmarshal(fields["account"], &req.Account) != nil || req.Account == "" {
		return req, &invalid{"account must be a non-empty string", "account"}
	}
	req.Amount = string(fields["amount"])
	if !amountText.MatchString(req.Amount) || !nonZero.MatchString(req.Amount) {
		return req, &invalid{"amount must be a positive number with at most 2 decimals", "amount"}
	}
	if json.Unmarshal(fields["currency"], &req.Currency) != nil || !currencyText.MatchString(req.Currency) {
		return req, &invalid{"currency must be 3 capital letters (ISO 4217)", "currency"}
	}
	// the test knobs, optional
	if delay, ok := fields["delay_ms"]; ok {
		var err error
		req.DelayMs, err = strconv.Atoi(string(delay))
		if !delayText.Match(delay) || err != nil || req.DelayMs > 10000 {
			return req, &invalid{"delay_ms must be an integer from 0 to 10000", "delay_ms"}
		}
	}
	if fail, ok := fields["fail"]; ok && string(fail) != "true" && string(fail) != "false" {
		return req, &invalid{"fail must be true or false", "fail"}
	}
	req.Fail = string(fields["fail"]) == "true"
	return req, nil
}

// The 201 answer.  The id and the amount as strings: a JavaScript client
// would round an id above 2^53.
type created struct {
	ID       int64  `json:"id,string"`
	Account  string `json:"account"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// What goes back to the client: retryAfter is nil unless status is 409;
// replayed: the answer of an earlier request with the key
type answer struct {
	status      int
	contentType string
	body        string
	retryAfter  *int
	replayed    bool
}

var db *pgxpool.Pool

func main() {
	// DATABASE_URL is a libpq URI, which pgx reads as it is
	config, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	config.MaxConns = 10
	if os.Getenv("PGBOUNCER") == "1" {
		// pgbouncer in transaction pooling: pgx prepares every query as a
		// named statement on the server connection it has at the moment, and
		// the next transaction may run on another.  The simple protocol
		// prepares nothing: each query goes with its parameters in one
		// message.  (statement_cache_capacity=0 is not enough: pgx then
		// prepares the unnamed statement and executes it in a second round
		// trip, which outside a transaction may reach another server
		// connection, and another client's unnamed statement.)
		config.ConnConfig.PreferSimpleProtocol = true
	}
	db, err = pgxpool.ConnectConfig(context.Background(), config)
	if err != nil {
		log.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening on", os.Getenv("PORT"))
	http.HandleFunc("/payments", handle)
	log.Fatal(http.Serve(listener, nil))
}

func handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		body = nil // a body cut short is no JSON object
	}
	var a answer
	if r.Method != http.MethodPost {
		a = problem(404, "Not Found", "POST /payments books a payment.", "")
	} else if req, bad := validate(body); bad != nil {
		// before the claim: a request refused here writes nothing and leaves
		// its key unused, for the corrected request
		a = problem(400, "Invalid request", bad.detail, bad.field)
	} else {
		// the header's value, or NULL when there is none
		var key *string
		if values := r.Header.Values("Idempotency-Key"); len(values) > 0 {
			key = &values[0]
		}
		if a, err = pay(r.Context(), key, string(body), req); err != nil {
			log.Printf("payment failed: %v", err) // a database error ends in (SQLSTATE XXXXX)
			a = problem(500, "Internal Server Error",
				"The payment was not booked: retry it with the same Idempotency-Key.", "")
		}
	}
	w.Header().Set("Content-Type", a.contentType)
	if a.retryAfter != nil {
		w.Header().Set("Retry-After", strconv.Itoa(*a.retryAfter))
	}
	if a.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

// One payment request, in one transaction
func pay(ctx context.Context, key *string, body string, req request) (answer, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return answer{}, err
	}
	defer tx.Rollback(ctx) // does nothing once committed

	var status string
	var httpStatus, retryAfter *int
	var replay, contentType *string
	err = tx.QueryRow(ctx, `
		SELECT status, http_status, body, content_type, retry_after
		  FROM idem_http_claim($1, idem_fingerprint($2::jsonb))`, key, body).
		Scan(&status, &httpStatus, &replay, &contentType, &retryAfter)
	if err != nil {
		return answer{}, err
	}
	if status != "claimed" {
		// a replay (completed, failed), a duplicate still in flight, a
		// mismatch or a bad key: idem has the answer
		replayed := status == "completed" || status == "failed"
		return answer{*httpStatus, *contentType, *replay, retryAfter, replayed}, tx.Commit(ctx)
	}

	p := created{Account: req.Account, Amount: req.Amount, Currency: req.Currency}
	err = tx.QueryRow(ctx,
		`INSERT INTO payments (idem_key, account, amount, currency) VALUES ($1, $2, $3, $4) RETURNING id`,
		key, req.Account, p.Amount, req.Currency).Scan(&p.ID)
	if err != nil {
		return answer{}, err
	}
	time.Sleep(time.Duration(req.DelayMs) * time.Millisecond)
	if req.Fail {
		return answer{}, errors.New(`the gateway failed (test knob "fail")`)
	}

	response, err := json.Marshal(p)
	if err != nil {
		return answer{}, err
	}
	if _, err = tx.Exec(ctx, `SELECT idem_http_respond($1, 201, $2)`, key, string(response)); err != nil {
		return answer{}, err
	}
	return answer{201, "application/json", string(response), nil, false}, tx.Commit(ctx)
}

// An answer with a problem body (RFC 9457), as idem's own; field names the
// request's member at fault
func problem(status int, title, detail, field string) answer {
	body, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
		Field  string `json:"field,omitempty"`
	}{"about:blank", title, status, detail, field})
	return answer{status, "application/problem+json", string(body), nil, false}
}
