package deploy

import (
	"regexp"
	"strings"
	"testing"
)

// proxyPool routes a request as the nginx map in conf does: the first regex that
// matches "METHOD URI" names the pool, else the default.
func proxyPool(t *testing.T, conf, method, uri string) string {
	t.Helper()
	block := conf[strings.Index(conf, "map \"$request_method $uri\" $loom_pool {"):]
	block = block[:strings.Index(block, "}")]
	line := regexp.MustCompile(`(?m)^\s*(default|"~([^"]+)")\s+(\S+);`)
	def := ""
	for _, m := range line.FindAllStringSubmatch(block, -1) {
		if m[1] == "default" {
			def = m[3]
			continue
		}
		if regexp.MustCompile(m[2]).MatchString(method + " " + uri) {
			return m[3]
		}
	}
	return def
}

// Both proxies send each route to the role that serves it: the command role's reads
// (a namespace's configuration and blacklist, an erasure's progress) to command.
func TestProxiesRouteEachRouteToItsRole(t *testing.T) {
	cases := []struct{ method, uri, pool string }{
		{"GET", "/v1/namespaces/support", "loom_command"},
		{"GET", "/v1/namespaces/support/blacklist", "loom_command"},
		{"GET", "/v1/erasures/0b8e6f3c", "loom_command"},
		{"PUT", "/v1/namespaces/support/memories/drink", "loom_command"},
		{"POST", "/v1/namespaces/support/memories:bulkSet", "loom_command"},
		{"GET", "/v1/namespaces/support/memories", "loom_query"},
		{"GET", "/v1/namespaces/support/keys", "loom_query"},
		{"GET", "/v1/namespaces/support/memories/drink", "loom_query"},
		{"GET", "/v1/namespaces/support/memories/drink/history", "loom_query"},
		{"GET", "/v1/namespaces/support/graph/entities/london", "loom_query"},
		{"GET", "/v1/memories/0b8e6f3c", "loom_query"},
		{"POST", "/v1/namespaces/support/memories:search", "loom_query"},
	}
	for _, file := range []string{"proxy/nginx.conf", "k8s/proxy.yaml"} {
		conf := readFile(t, file)
		for _, c := range cases {
			if got := proxyPool(t, conf, c.method, c.uri); got != c.pool {
				t.Errorf("%s routes %s %s to %s, want %s", file, c.method, c.uri, got, c.pool)
			}
		}
	}
}
