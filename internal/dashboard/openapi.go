package dashboard

import (
	_ "embed"
	"net/http"
)

// openAPI documents the JSON API (api.go); a test holds it to the routes.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
