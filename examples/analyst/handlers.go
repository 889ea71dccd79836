package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/agentq/agentq"
)

// analyst holds what the steps share: the database.
type analyst struct{ db *sql.DB }

// runSQL runs the query the model chose, read-only, and returns its rows.
// A query that does not run is not retried: it is parked for a person.
func (a *analyst) runSQL(ctx context.Context, s *agentq.Step) (any, error) {
	var args struct {
		Query string `json:"query"`
	}
	if err := s.Args(&args); err != nil {
		return nil, agentq.DeadLetter(err)
	}
	q := strings.TrimSpace(args.Query)
	if !strings.HasPrefix(strings.ToUpper(q), "SELECT ") {
		return nil, agentq.DeadLetter(fmt.Errorf("only SELECT queries run here, got %.60q", q))
	}
	// durable: a retry of this step after a crash reuses the rows
	rows, err := agentq.Do(ctx, s, "query", func(ctx context.Context) ([]map[string]any, error) { return a.query(ctx, q) })
	if err != nil {
		return nil, agentq.DeadLetter(fmt.Errorf("the query does not run: %w", err))
	}
	return map[string]any{"query": q, "rows": rows}, nil
}

func (a *analyst) query(ctx context.Context, q string, args ...any) ([]map[string]any, error) {
	tx, err := a.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rs, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := map[string]any{}
		for i, c := range cols {
			row[c] = vals[i]
		}
		out = append(out, row)
	}
	return out, rs.Err()
}

// growth computes each region's growth from its first quarter to its last,
// and the fastest-growing region.
func growth(ctx context.Context, s *agentq.Step) (any, error) {
	var args struct {
		Rows []struct {
			Region  string  `json:"region"`
			Quarter string  `json:"quarter"`
			Total   float64 `json:"total"`
		} `json:"rows"`
	}
	if err := s.Args(&args); err != nil {
		return nil, agentq.DeadLetter(err)
	}
	type span struct {
		firstQ, lastQ string
		first, last   float64
	}
	by := map[string]*span{}
	for _, r := range args.Rows {
		if r.Quarter == "" {
			return nil, agentq.DeadLetter(errors.New("the rows have no quarter column: growth needs totals per quarter"))
		}
		sp := by[r.Region]
		if sp == nil {
			sp = &span{firstQ: r.Quarter, lastQ: r.Quarter, first: r.Total, last: r.Total}
			by[r.Region] = sp
		}
		if r.Quarter < sp.firstQ {
			sp.firstQ, sp.first = r.Quarter, r.Total
		}
		if r.Quarter > sp.lastQ {
			sp.lastQ, sp.last = r.Quarter, r.Total
		}
	}
	if len(by) == 0 {
		return nil, agentq.DeadLetter(errors.New("no rows to compute growth from"))
	}
	out := map[string]float64{}
	regions := make([]string, 0, len(by))
	for region, sp := range by {
		if sp.first != 0 {
			out[region] = math.Round((sp.last-sp.first)/sp.first*1000) / 10
		}
		regions = append(regions, region)
	}
	sort.Slice(regions, func(i, j int) bool { return out[regions[i]] > out[regions[j]] })
	return map[string]any{"growth": out, "top": regions[0]}, nil
}

// figureSchema is fetch_figure's arguments.
var figureSchema = json.RawMessage(`{"type": "object", "required": ["region"],
  "properties": {"region": {"type": "string"}, "quarter": {"type": "string"}}}`)

// fetchFigure is a tool the report's model may call: one region's total,
// for one quarter or the whole year.
func (a *analyst) fetchFigure(ctx context.Context, raw json.RawMessage) (any, error) {
	var args struct{ Region, Quarter string }
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, err // goes back to the model as an error result
	}
	q, params := "SELECT SUM(amount) AS total FROM sales WHERE region = ?", []any{args.Region}
	if args.Quarter != "" {
		q, params = q+" AND quarter = ?", append(params, args.Quarter)
	}
	rows, err := a.query(ctx, q, params...)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || rows[0]["total"] == nil {
		return nil, fmt.Errorf("no sales for region %q", args.Region)
	}
	return map[string]any{"region": args.Region, "quarter": args.Quarter, "total": rows[0]["total"]}, nil
}
