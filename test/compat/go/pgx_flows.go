// pgx (v4, Debian's golang-github-jackc-pgx-v4-dev): the extended protocol
// with binary formats, its handling of ';' and empty statements, batches,
// transactions and errors. Prints one JSON object, so that the same program
// run against cotwire and against PostgreSQL can be compared.
// Usage: go run pgx_flows.go CONNECTION-URL TARGET
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

func main() {
	ctx := context.Background()
	out := map[string]interface{}{}
	conn, err := pgx.Connect(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	must := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS pgx_items")
	must(err)
	_, err = conn.Exec(ctx, "CREATE TABLE pgx_items (id integer PRIMARY KEY, name text, price numeric(10,2), made timestamptz, tags text[], ok boolean, ratio double precision)")
	must(err)
	// Parameters travel in binary; results come back in binary.
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	tag, err := conn.Exec(ctx, "INSERT INTO pgx_items VALUES ($1, $2, $3, $4, $5, $6, $7)", 1, "widget", "9.99", at, []string{"a", "b"}, true, 0.25)
	must(err)
	out["insert_tag"] = tag.String()
	var id int32
	var name string
	var price string
	var when time.Time
	var tags []string
	var ok bool
	var ratio float64
	must(conn.QueryRow(ctx, "SELECT id, name, price::text, made, tags, ok, ratio FROM pgx_items WHERE id = $1", 1).Scan(&id, &name, &price, &when, &tags, &ok, &ratio))
	out["row"] = []interface{}{id, name, price, when.UTC().Format(time.RFC3339), tags, ok, ratio}
	// Simple protocol: several statements, a trailing ';' and an empty statement.
	_, err = conn.Exec(ctx, "INSERT INTO pgx_items (id, name) VALUES (2, 'two'); INSERT INTO pgx_items (id, name) VALUES (3, 'three');")
	must(err)
	_, err = conn.Exec(ctx, ";")
	out["empty_statement"] = err == nil
	var count int64
	must(conn.QueryRow(ctx, "SELECT count(*) FROM pgx_items").Scan(&count))
	out["count"] = count
	// Batch.
	batch := &pgx.Batch{}
	batch.Queue("INSERT INTO pgx_items (id, name) VALUES ($1, $2)", 4, "four")
	batch.Queue("SELECT name FROM pgx_items WHERE id = $1", 4)
	br := conn.SendBatch(ctx, batch)
	_, err = br.Exec()
	must(err)
	var four string
	must(br.QueryRow().Scan(&four))
	must(br.Close())
	out["batch"] = four
	// Transactions.
	tx, err := conn.Begin(ctx)
	must(err)
	_, err = tx.Exec(ctx, "INSERT INTO pgx_items (id, name) VALUES (5, 'gone')")
	must(err)
	must(tx.Rollback(ctx))
	must(conn.QueryRow(ctx, "SELECT count(*) FROM pgx_items").Scan(&count))
	out["count_after_rollback"] = count
	// Errors.
	codes := map[string]string{}
	for name, sql := range map[string]string{"unique": "INSERT INTO pgx_items (id) VALUES (1)", "undefined_table": "SELECT * FROM pgx_nowhere"} {
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			codes[name] = pgErr.Code
		} else {
			codes[name] = "no error"
		}
	}
	out["errors"] = codes
	if os.Args[2] == "cotwire" {
		var step int32
		must(conn.QueryRow(ctx, "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3) RETURNING step_index", "pgx", "Summary", "done").Scan(&step))
		out["ledger_returning"] = step
	}
	_, err = conn.Exec(ctx, "DROP TABLE pgx_items")
	must(err)
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
