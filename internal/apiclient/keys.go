package apiclient

import (
	"context"
	"net/url"

	"github.com/agentq/agentq/internal/record"
)

// Keys lists the keys the live workers advertise, with their state.
func (c *Client) Keys(ctx context.Context) ([]record.KeyInfo, error) {
	var keys []record.KeyInfo
	err := c.do(ctx, "GET", "/api/v1/keys", nil, &keys)
	return keys, err
}

// EnableKeys re-enables the key ref names ("provider#N") or, with all,
// every key.
func (c *Client) EnableKeys(ctx context.Context, ref string, all bool) (record.EnableResult, error) {
	q := url.Values{}
	if all {
		q.Set("all", "true")
	} else {
		q.Set("key", ref)
	}
	var r record.EnableResult
	err := c.do(ctx, "POST", "/api/v1/keys/enable?"+q.Encode(), nil, &r)
	return r, err
}
