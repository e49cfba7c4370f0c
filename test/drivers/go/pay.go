// pgx v4 behind pgbouncer in transaction pooling: payments through idem
// (BEGIN; claim; INSERT the charge; complete; COMMIT) with the driver's
// defaults, or with PGBOUNCER=1 its setting for the pooler, the simple
// protocol (prefer_simple_protocol=true: no prepared statements at all).
//
//	pay postgresql://USER@HOST:PORT/DB clash PREFIX
//	    client a pays 7 keys, then client b pays up to 7 on the same server
//	    connection ("shared"), and one more ("after"); then, while a third
//	    client holds a server connection in a transaction, a pays once more
//	    on one it has not used ("moved").  Prints for each step ok, or its
//	    first failure as SQLSTATE@PAYMENT.
//	pay postgresql://USER@HOST:PORT/DB storm PREFIX CLIENTS PAYMENTS KEYS
//	    CLIENTS connections at once each make PAYMENTS payments, client i's
//	    j-th on key PREFIX-((i*PAYMENTS+j) % KEYS), a failed one retried up to
//	    10 times.  Prints "KEY STATUS" per payment and "error SQLSTATE MESSAGE"
//	    per failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

var ctx = context.Background()

func connect() *pgx.Conn {
	url := os.Args[1]
	if os.Getenv("PGBOUNCER") == "1" {
		url += "?prefer_simple_protocol=true"
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		fail(err)
	}
	return conn
}

// One payment in one transaction; returns the claim's status
func pay(conn *pgx.Conn, key string) (status string, err error) {
	err = conn.BeginFunc(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, "SELECT status FROM idem_claim($1, idem_fingerprint($2::jsonb))",
			key, `{"amount": "100.00"}`).Scan(&status)
		if err != nil || status != "claimed" {
			return err
		}
		var payment int64
		err = tx.QueryRow(ctx, "INSERT INTO payments (idem_key, amount) VALUES ($1, $2) RETURNING id",
			key, "100.00").Scan(&payment)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT idem_complete($1, $2::jsonb)", key, fmt.Sprintf(`{"payment": %d}`, payment))
		return err
	})
	return status, err
}

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return "none"
}

func describe(err error) string {
	return "error " + sqlstate(err) + " " + strings.SplitN(err.Error(), "\n", 2)[0]
}

func fail(err error) {
	fmt.Println(describe(err))
	os.Exit(1)
}

// The SQLSTATE of the first of n payments on fresh keys that fails, with
// its number ("42P05@6"), or ok
func payMany(conn *pgx.Conn, prefix string, n int) string {
	for j := 1; j <= n; j++ {
		if _, err := pay(conn, fmt.Sprintf("%s-%d", prefix, j)); err != nil {
			return fmt.Sprintf("%s@%d", sqlstate(err), j)
		}
	}
	return "ok"
}

func clash(prefix string) {
	a, b, holder := connect(), connect(), connect()
	fmt.Println("shared", payMany(a, prefix+"-a", 7), payMany(b, prefix+"-b", 7))
	fmt.Println("after", payMany(b, prefix+"-after", 1))
	if _, err := holder.Exec(ctx, "BEGIN; SELECT 1"); err != nil {
		fail(err)
	}
	fmt.Println("moved", payMany(a, prefix+"-moved", 1))
	holder.Close(ctx)
}

func storm(prefix string, clients, payments, keys int) {
	outs := make([][]string, clients)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < clients; i++ {
		ready.Add(1)
		done.Add(1)
		go func(i int) {
			defer done.Done()
			conn := connect()
			defer conn.Close(ctx)
			ready.Done()
			<-start
			for j := 0; j < payments; j++ {
				key := fmt.Sprintf("%s-%d", prefix, (i*payments+j)%keys)
				status := "error"
				for t := 0; t < 10 && status == "error"; t++ {
					s, err := pay(conn, key)
					if err != nil {
						outs[i] = append(outs[i], describe(err))
					} else {
						status = s
					}
				}
				outs[i] = append(outs[i], key+" "+status)
			}
		}(i)
	}
	ready.Wait()
	close(start)
	done.Wait()
	for _, out := range outs {
		fmt.Println(strings.Join(out, "\n"))
	}
}

func main() {
	if os.Args[2] == "clash" {
		clash(os.Args[3])
		return
	}
	n := make([]int, 3)
	for i := range n {
		n[i], _ = strconv.Atoi(os.Args[4+i])
	}
	storm(os.Args[3], n[0], n[1], n[2])
}
