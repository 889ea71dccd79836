package dashboard

import (
	"net/http"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/webhook"
)

// maxWebhooksListed bounds the deliveries listed of each state.
const maxWebhooksListed = 100

// webhooksAPI registers the webhook deliveries' listing:
//
//	GET /api/v1/webhooks   deliveries in the webhooks queue: retrying and
//	                       archived first, then running, waiting and
//	                       delivered (event id, workflow, event, host,
//	                       state, attempts, last error)
func (s *Server) webhooksAPI(mux *http.ServeMux) {
	insp := asynq.NewInspectorFromRedisClient(s.o.Redis) // shares the connection: nothing to close
	mux.HandleFunc("GET /api/v1/webhooks", func(w http.ResponseWriter, r *http.Request) {
		ds, err := webhook.List(insp, maxWebhooksListed)
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ds)
	})
	mux.HandleFunc("GET /webhooks", func(w http.ResponseWriter, r *http.Request) {
		ds, err := webhook.List(insp, maxWebhooksListed)
		if err != nil {
			s.fail(w, err)
			return
		}
		s.page(w, r, "webhooks", "Webhook deliveries", map[string]any{"Deliveries": ds, "Max": maxWebhooksListed})
	})
}
