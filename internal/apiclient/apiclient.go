// Package apiclient is the producer API over the dashboard's HTTP API
// (/api/v1/): the same operations as producer.Client, for producers that do
// not reach Redis. `enqueue --server URL` uses it.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
)

// ErrUnauthorized wraps a 401 or 403: no token, or a wrong one.
var ErrUnauthorized = errors.New("the dashboard refused the token (set AGENTQ_DASHBOARD_TOKEN)")

// ErrUnreachable wraps failures to reach the server at all.
var ErrUnreachable = errors.New("cannot reach the agentq dashboard")

// Client talks to one dashboard.
type Client struct {
	base  string // e.g. http://agentq:8080
	token string
	http  *http.Client
}

// New returns a client for the dashboard at base; token may be empty
// (reads need none; changes do).
func New(base, token string) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, http: &http.Client{Timeout: 30 * time.Second}}
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	return c.doHeader(ctx, method, path, nil, body, out)
}

// doHeader is do with more request headers.
func (c *Client) doHeader(ctx context.Context, method, path string, header http.Header, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil { // the caller's deadline or cancel, not the server
			return fmt.Errorf("%s %s: %w", method, shownPath(path), ctx.Err())
		}
		return &unreachableError{base: redactedURL(c.base), err: err, mayHaveRun: method != http.MethodGet && !notSent(err)}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode >= 300 {
		path := shownPath(path) // a query may carry a caller's text of any size
		if err := decodeError(method, path, resp.StatusCode, data); !errors.Is(err, errNoAnswer) {
			return err
		}
		// a proxy's 502, 503 or 504 with no answer of the dashboard's
		// behind it: the dashboard is restarting or away
		return &unreachableError{base: redactedURL(c.base), err: fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, http.StatusText(resp.StatusCode)),
			mayHaveRun: method != http.MethodGet && resp.StatusCode == http.StatusGatewayTimeout}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// SubmitWorkflow sends a parsed spec; the server validates it again
// against its own configuration and checks it against what live workers
// serve (unless producer.WithoutWorkerCheck: ?check=false). An idempotency
// key (producer.WithIdempotencyKey) goes as the Idempotency-Key header.
func (c *Client) SubmitWorkflow(ctx context.Context, wspec *spec.Spec, opts ...producer.SubmitOption) (producer.Submission, error) {
	body, err := json.Marshal(wspec)
	if err != nil {
		return producer.Submission{}, err
	}
	set := producer.ApplySubmitOptions(opts...)
	q := url.Values{}
	if set.SkipWorkerCheck {
		q.Set("check", "false")
	}
	if set.Deadline > 0 {
		q.Set("deadline", set.Deadline.String())
	}
	path := "/api/v1/workflows"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var h http.Header
	if set.IdempotencyKey != "" {
		if err := producer.CheckIdempotencyKey(set.IdempotencyKey); err != nil {
			return producer.Submission{}, err
		}
		h = http.Header{"Idempotency-Key": {set.IdempotencyKey}}
	}
	var wf struct {
		ID       string `json:"id"`
		Existing bool   `json:"existing"`
	}
	if err := c.doHeader(ctx, "POST", path, h, body, &wf); err != nil {
		return producer.Submission{}, err
	}
	return producer.Submission{ID: wf.ID, Existing: wf.Existing}, nil
}

// Status returns a workflow.
func (c *Client) Status(ctx context.Context, id string) (*producer.Workflow, error) {
	var wf producer.Workflow
	if err := c.do(ctx, "GET", "/api/v1/workflows/"+url.PathEscape(id), nil, &wf); err != nil {
		return nil, err
	}
	return &wf, nil
}

// Result returns a workflow and its final steps.
func (c *Client) Result(ctx context.Context, id string) (*producer.Result, error) {
	var r struct {
		Workflow *producer.Workflow    `json:"workflow"`
		Final    []producer.StepRecord `json:"final"`
	}
	if err := c.do(ctx, "GET", "/api/v1/workflows/"+url.PathEscape(id)+"/result", nil, &r); err != nil {
		return nil, err
	}
	return &producer.Result{Workflow: r.Workflow, Final: r.Final}, nil
}

// Instances reads a page of a map step's instances.
func (c *Client) Instances(ctx context.Context, id, step string, offset, limit int) (*producer.InstancePage, error) {
	var p producer.InstancePage
	path := fmt.Sprintf("/api/v1/workflows/%s/steps/%s/instances?offset=%d&limit=%d", url.PathEscape(id), url.PathEscape(step), offset, limit)
	if err := c.do(ctx, "GET", path, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Wait polls until the workflow is settled (producer.Settled) or ctx ends.
func (c *Client) Wait(ctx context.Context, id string, poll time.Duration, onChange func(*producer.Workflow)) (*producer.Workflow, error) {
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var (
		last *producer.Workflow
		sig  string
	)
	for {
		wf, err := c.Status(ctx, id)
		if err != nil && ctx.Err() != nil && last != nil {
			return last, fmt.Errorf("gave up waiting for workflow %s (state %s): %w", id, last.State, ctx.Err())
		}
		if err != nil {
			return nil, err
		}
		if s := producer.Signature(wf); onChange != nil && (last == nil || s != sig) {
			sig = s
			onChange(wf)
		}
		last = wf
		if producer.Settled(wf.State) {
			return wf, nil
		}
		select {
		case <-ctx.Done():
			return wf, fmt.Errorf("gave up waiting for workflow %s (state %s): %w", id, wf.State, ctx.Err())
		case <-t.C:
		}
	}
}

// Cancel cancels a workflow and returns its state after.
func (c *Client) Cancel(ctx context.Context, id string) (string, error) {
	var r struct {
		State string `json:"state"`
	}
	err := c.do(ctx, "POST", "/api/v1/workflows/"+url.PathEscape(id)+"/cancel", nil, &r)
	return r.State, err
}

// List returns recent workflows (the server caps how many).
func (c *Client) List(ctx context.Context, state string, limit int) ([]*producer.Workflow, error) {
	var wfs []*producer.Workflow
	err := c.do(ctx, "GET", "/api/v1/workflows?state="+url.QueryEscape(state), nil, &wfs)
	if limit > 0 && len(wfs) > limit {
		wfs = wfs[:limit]
	}
	return wfs, err
}

// ListPage returns a page of workflows, newest first, filtered by o,
// without their steps.
func (c *Client) ListPage(ctx context.Context, o producer.ListOptions) ([]*producer.Workflow, error) {
	q := url.Values{"state": {o.State}, "name": {o.Name}, "after": {o.After}, "limit": {"50"}} // 0 or less: 50, as over Redis
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var wfs []*producer.Workflow
	err := c.do(ctx, "GET", "/api/v1/workflows?"+q.Encode(), nil, &wfs)
	return wfs, err
}

// Spec returns the spec workflow id was submitted with.
func (c *Client) Spec(ctx context.Context, id string) (*spec.Spec, error) {
	var s spec.Spec
	if err := c.do(ctx, "GET", "/api/v1/workflows/"+url.PathEscape(id)+"/spec", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Decide records a decision on a waiting approval step (by is the API's
// own: "api"); flow.ErrNotWaiting if the step is not waiting.
// PutSpec stores wspec under name (POST /api/v1/specs/{name}, the spec as
// JSON).
func (c *Client) PutSpec(ctx context.Context, name string, wspec *spec.Spec) (*producer.StoredSpec, error) {
	body, err := json.Marshal(wspec)
	if err != nil {
		return nil, fmt.Errorf("spec %s: %w", name, err)
	}
	var out producer.StoredSpec
	if err := c.do(ctx, "POST", "/api/v1/specs/"+url.PathEscape(name), body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StoredSpecs lists the stored specs (GET /api/v1/specs).
func (c *Client) StoredSpecs(ctx context.Context) ([]producer.StoredSpec, error) {
	var out []producer.StoredSpec
	err := c.do(ctx, "GET", "/api/v1/specs", nil, &out)
	return out, err
}

// StoredSpecOf reads a stored spec's version (0: the latest).
func (c *Client) StoredSpecOf(ctx context.Context, name string, version int) (*spec.Spec, int, error) {
	var out struct {
		Version int        `json:"version"`
		Spec    *spec.Spec `json:"spec"`
	}
	path := "/api/v1/specs/" + url.PathEscape(name)
	if version != 0 { // none: the latest
		path += "?version=" + strconv.Itoa(version)
	}
	if err := c.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, 0, err
	}
	return out.Spec, out.Version, nil
}

// Signal sends a signal (POST /api/v1/signals); its idempotency key goes
// as the Idempotency-Key header.
func (c *Client) Signal(ctx context.Context, s producer.Signal) (*producer.SignalResult, error) {
	var h http.Header
	if s.IdempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {s.IdempotencyKey}}
	}
	s.IdempotencyKey = ""
	body, err := json.Marshal(s)
	if err != nil { // data that is not one JSON value
		return nil, fmt.Errorf("signal %s: %w: data is not JSON: %v", s.Name, producer.ErrBadSignal, err)
	}
	var res producer.SignalResult
	if err := c.doHeader(ctx, "POST", "/api/v1/signals", h, body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (c *Client) Decide(ctx context.Context, id, step string, approve bool, comment, _ string) (string, error) {
	body, _ := json.Marshal(map[string]any{"approve": approve, "comment": comment})
	var r struct {
		State string `json:"state"`
	}
	err := c.do(ctx, "POST", "/api/v1/workflows/"+url.PathEscape(id)+"/steps/"+url.PathEscape(step)+"/decision", body, &r)
	return r.State, err
}

// Rerun runs an ended workflow again from step from; it returns the new
// generation.
func (c *Client) Rerun(ctx context.Context, id, from string) (int, error) {
	body, _ := json.Marshal(map[string]string{"from": from})
	var r struct {
		Generation int `json:"generation"`
	}
	err := c.do(ctx, "POST", "/api/v1/workflows/"+url.PathEscape(id)+"/rerun", body, &r)
	return r.Generation, err
}

// maxShownPath bounds the request path an error names.
const maxShownPath = 160

// shownPath is path as an error names it: whole up to maxShownPath bytes,
// else its start and its length.
func shownPath(path string) string {
	if len(path) <= maxShownPath {
		return path
	}
	return strings.ToValidUTF8(path[:maxShownPath], "") + fmt.Sprintf("… (%d bytes)", len(path))
}
