package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// wideSpec is plan (a code step returning n items) → m (a map: one code
// step per item) → after.
func wideSpec(n int) string {
	return fmt.Sprintf(`name: wide
input: { n: %d }
steps:
  - { id: plan, run: plan, with: { n: "{{ .Input.n }}" } }
  - id: m
    depends_on: [plan]
    for_each: "{{ .Steps.plan.JSON.items }}"
    run: item
  - { id: after, depends_on: [m], run: after }
`, n)
}

// mapFuncs are wideSpec's code steps.
func mapFuncs() map[string]engine.StepFunc {
	return map[string]engine.StepFunc{
		"plan": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var a struct{ N int }
			if err := s.Args(&a); err != nil {
				return nil, engine.ToDeadLetter(err)
			}
			items := make([]int, a.N)
			for i := range items {
				items[i] = i
			}
			return map[string]any{"items": items}, nil
		},
		"item": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			return map[string]int{"value": 2 * s.Index()}, nil
		},
		"after": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "after", nil },
	}
}

// wideWorkflow runs a workflow mapping n items to completion on e.
func wideWorkflow(t *testing.T, e *testenv.Env, n int) string {
	t.Helper()
	id := e.Submit(t, e.Spec(wideSpec(n)))
	if wf := e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed); wf.State != store.StateCompleted {
		t.Fatalf("workflow %s: %+v", wf.State, wf.Steps)
	}
	return id
}

// instanceIDs are "m[from]" … "m[to-1]".
func instanceIDs(from, to int) []string {
	var ids []string
	for i := from; i < to; i++ {
		ids = append(ids, fmt.Sprintf("m[%d]", i))
	}
	return ids
}

// The API pages through a 120-instance map: a page is where it was asked
// for and in item order, a limit over 500 is clamped (not refused, and
// a 520-instance map gives 500), and
// a plain step, a bad offset or limit and an unknown workflow are one-line
// JSON errors; without the token it answers nothing.
func TestAPIPagesThroughAMapsInstances(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Steps: mapFuncs()})
	id := wideWorkflow(t, e, 120)
	d := serveDash(t, e, dashboard.Options{Token: token})
	path := func(step, q string) string { return "/api/v1/workflows/" + id + "/steps/" + step + "/instances" + q }

	r := d.do(t, call{Path: path("m", "?offset=100&limit=50"), Bearer: token})
	var page producer.InstancePage
	if r.Code != 200 || json.Unmarshal([]byte(r.Body), &page) != nil {
		t.Fatalf("offset 100 limit 50: %d %.300s", r.Code, r.Body)
	}
	want := record.MapCounts{Items: 120, Started: 120, Settled: 120}
	if page.Workflow != id || page.Step != "m" || page.Offset != 100 || page.Counts != want {
		t.Errorf("page %s %s offset %d counts %+v, want %s m 100 %+v", page.Workflow, page.Step, page.Offset, page.Counts, id, want)
	}
	var got []string
	for _, in := range page.Instances {
		got = append(got, in.ID)
		if in.State != store.StepDone {
			t.Errorf("instance %s is %s", in.ID, in.State)
		}
	}
	if strings.Join(got, ",") != strings.Join(instanceIDs(100, 120), ",") {
		t.Errorf("offset 100 limit 50 gave %v, want m[100]…m[119] in order", got)
	}
	if !strings.Contains(page.Instances[0].Output, "200") {
		t.Errorf("m[100]'s output %q, want its value 200", page.Instances[0].Output)
	}

	// a limit over the cap is clamped: a 520-instance map gives 500
	wide := wideWorkflow(t, e, 520)
	for _, wf := range []struct {
		id   string
		want int
	}{{id, 120}, {wide, producer.MaxInstancesPage}} {
		r := d.do(t, call{Path: "/api/v1/workflows/" + wf.id + "/steps/m/instances?limit=1000", Bearer: token})
		page := producer.InstancePage{}
		if r.Code != 200 || json.Unmarshal([]byte(r.Body), &page) != nil || len(page.Instances) != wf.want ||
			page.Instances[wf.want-1].ID != fmt.Sprintf("m[%d]", wf.want-1) {
			t.Fatalf("limit 1000: %d, %d instances, want %d", r.Code, len(page.Instances), wf.want)
		}
	}
	r = d.do(t, call{Path: path("m", "?offset=500"), Bearer: token})
	if r.Code != 200 || !strings.Contains(r.Body, `"instances":[]`) {
		t.Errorf("offset past the end: %d %.200s, want an empty page", r.Code, r.Body)
	}

	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{path("plan", ""), 400, "not a map step"},
		{path("nope", ""), 400, "not a map step"},
		{path("m", "?offset=-1"), 400, "offset"},
		{path("m", "?offset=ten"), 400, "offset"},
		{path("m", "?limit=-5"), 400, "limit"},
		{path("m", "?limit=1e3"), 400, "limit"},
		{"/api/v1/workflows/wf_nope/steps/m/instances", 404, "not found"},
	} {
		r := d.do(t, call{Path: tc.path, Bearer: token})
		var body map[string]string
		if r.Code != tc.code || json.Unmarshal([]byte(r.Body), &body) != nil || !strings.Contains(body["error"], tc.says) ||
			strings.Count(strings.TrimSpace(r.Body), "\n") != 0 {
			t.Errorf("GET %s: %d %q, want %d and a one-line error saying %q", tc.path, r.Code, r.Body, tc.code, tc.says)
		}
	}
	if r := d.do(t, call{Path: path("m", "")}); r.Code != http.StatusUnauthorized || strings.Contains(r.Body, "m[0]") {
		t.Errorf("without the token: %d %.100s", r.Code, r.Body)
	}
}

var instanceRow = regexp.MustCompile(`<tr class="instance"><td>(m\[\d+\])</td>`)

// The workflow page shows a 120-instance map as one row (and one graph
// node) with its counts, which expands into the first 50 instances and a
// link to the next 50; the page at offset 100 lists m[100]…m[119]. A bad
// offset or a ?map= naming no map is a one-line plain-text 400 (never
// HTML: the ?map= value is in it).
func TestWorkflowPageCollapsesAMap(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Steps: mapFuncs()})
	id := wideWorkflow(t, e, 120)
	d := serveDash(t, e, dashboard.Options{})
	rows := func(body string) []string {
		var ids []string
		for _, m := range instanceRow.FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}

	r := d.do(t, call{Path: "/workflows/" + id})
	if r.Code != 200 {
		t.Fatalf("workflow page: %d %.300s", r.Code, r.Body)
	}
	body := r.Body
	if n := strings.Count(body, `<tr id="step-m" class="map">`); n != 1 || strings.Count(body, `id="step-`) != 3 {
		t.Errorf("%d rows for the map (want 1) among %d step rows (want 3)", n, strings.Count(body, `id="step-`))
	}
	row := body[strings.Index(body, `<tr id="step-m"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, "done") || !strings.Contains(row, "120/120") {
		t.Errorf("the map's row lacks its state and 120/120:\n%s", row)
	}
	graph := body[strings.Index(body, `class="graph"`):strings.Index(body, "<table>")]
	if !strings.Contains(graph, `href="#step-m">m<small>done · 120/120</small>`) || strings.Contains(graph, "m[") {
		t.Errorf("the graph does not show the map as one node with its counts:\n%s", graph)
	}
	if got := rows(body); strings.Join(got, ",") != strings.Join(instanceIDs(0, 50), ",") {
		t.Errorf("first page lists %d instances %v, want m[0]…m[49]", len(got), got)
	}
	if !strings.Contains(body, `<details id="map-m">`) || !strings.Contains(body, `<a class="next" href="?map=m&amp;offset=50#map-m">next 50</a>`) ||
		strings.Contains(body, `class="prev"`) {
		t.Errorf("first page: want a closed details and a next 50 link only:\n%s", body[strings.Index(body, `<tr class="map-instances"`):])
	}

	r = d.do(t, call{Path: "/workflows/" + id + "?map=m&offset=100"})
	if got := rows(r.Body); r.Code != 200 || strings.Join(got, ",") != strings.Join(instanceIDs(100, 120), ",") {
		t.Fatalf("offset 100: %d, lists %v, want m[100]…m[119]", r.Code, got)
	}
	if !strings.Contains(r.Body, `<details id="map-m" open>`) || !strings.Contains(r.Body, `<a class="prev" href="?map=m&amp;offset=50#map-m">previous 50</a>`) ||
		strings.Contains(r.Body, `class="next"`) || !strings.Contains(r.Body, "101–120 of 120") {
		t.Errorf("offset 100: want an open details, a previous link, no next link, 101–120 of 120")
	}

	for _, q := range []string{"?offset=-1", "?map=m&offset=x", "?map=plan", "?map=" + url.QueryEscape("<script>alert(1)</script>")} {
		r := d.do(t, call{Path: "/workflows/" + id + q})
		if r.Code != http.StatusBadRequest || strings.Count(strings.TrimSpace(r.Body), "\n") != 0 ||
			!strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d %s %q, want a one-line plain-text 400", q, r.Code, r.Header.Get("Content-Type"), r.Body)
		}
	}
}
