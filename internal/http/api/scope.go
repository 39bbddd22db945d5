package api

import "net/http"

// ScopeOf returns the scope of r's bearer token, and false when r carries none; with no
// token configured every request is admin. The console (internal/http/console) gates its pages
// and buttons with it, so that they take the API's tokens and no others.
func (s *Server) ScopeOf(r *http.Request) (Scope, bool) { return s.auth.scope(r) }
