package client

import "github.com/agentq/agentq/internal/producer"

// Feed reads workflows' event logs for a process that follows many at
// once, the dashboard (producer.Feed); nil for a Remote client.
func (c *Client) Feed() *producer.Feed {
	if d, ok := c.driver.(redisDriver); ok {
		return d.Client.Feed()
	}
	return nil
}

// WatchStreams makes the metrics Over's client serves report open as the
// dashboard's open event streams (agentq_dashboard_event_streams); a
// client without them ignores it.
func (c *Client) WatchStreams(open func() int) {
	if c.mon != nil && c.mon.gauges != nil {
		c.mon.gauges.WatchStreams(open)
	}
}
