package schemas_test

// A session's newest digest (query/session_digest.go), in documentedRoutes: added
// here so the route list's own file is left as it is.
func init() {
	documentedRoutes["/v1/namespaces/{ns}/sessions/{session_id}/digest"] = []string{"get"}
}
