package proxy

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"
)

func TestModelsListTheRouteAliases(t *testing.T) {
	t.Parallel()
	route := `  - name: scenes
    models: [scene-writer, scene-writer-2]
    upstream: mock
    response_model: alias
    inject: {use_custom_system_prompt: true, custom_system_prompt: "Describe the scene."}`
	h := newHarness(t, `default: {content: ok}`, heldRouteConfig("", route))
	ctx := context.Background()

	c := oa.NewClient(option.WithBaseURL(h.base+"/v1/"), option.WithAPIKey("client-key"), option.WithMaxRetries(0))
	owners := map[string]string{}
	pager := c.Models.ListAutoPaging(ctx)
	for pager.Next() {
		m := pager.Current()
		owners[m.ID] = string(m.OwnedBy)
	}
	if err := pager.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"mock-model": "factgate-mock", "ra3-analyst": "factgate", "scene-writer": "factgate", "scene-writer-2": "factgate"}
	if !reflect.DeepEqual(owners, want) {
		t.Errorf("openai-go lists %v, want %v", owners, want)
	}
	m, err := c.Models.Get(ctx, "ra3-analyst")
	if err != nil || m.ID != "ra3-analyst" || m.OwnedBy != "factgate" {
		t.Errorf("GET /v1/models/ra3-analyst: %+v, %v", m, err)
	}
	if m, err := c.Models.Get(ctx, "mock-model"); err != nil || m.ID != "mock-model" {
		t.Errorf("an upstream model is not answered by the upstream: %+v, %v", m, err)
	}
	var apiErr *oa.Error
	if _, err := c.Models.Get(ctx, "gpt-9"); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("an unknown model: %v, want the upstream's 404", err)
	}

	cfg := goopenai.DefaultConfig("client-key")
	cfg.BaseURL = h.base + "/v1"
	goc := goopenai.NewClientWithConfig(cfg)
	list, err := goc.ListModels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 4 {
		t.Errorf("go-openai lists %+v", list.Models)
	}
	if m, err := goc.GetModel(ctx, "scene-writer-2"); err != nil || m.ID != "scene-writer-2" || m.OwnedBy != "factgate" {
		t.Errorf("go-openai GetModel(scene-writer-2): %+v, %v", m, err)
	}

	// The answer's model is the upstream's, unless the route sets response_model: alias.
	for _, tc := range []struct{ model, want string }{{"ra3-analyst", "deepseek-chat"}, {"scene-writer-2", "scene-writer-2"}} {
		for client, got := range allClients(t, h, chatCase{Model: tc.model, Turns: []chatTurn{{Role: "user", Content: "hi"}}}) {
			if got.Model != tc.want {
				t.Errorf("%s: %s answered with model %q, want %q", client, tc.model, got.Model, tc.want)
			}
		}
	}
}

func TestResponseModelAliasNeedsAHeldRoute(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte("upstreams: {u: {base_url: 'http://127.0.0.1:1/v1'}}\nroutes: [{name: plain, models: [m], upstream: u, response_model: alias}]"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "routes[0] (plain).response_model: alias needs a route with interceptors") {
		t.Fatalf("New: %v", err)
	}
}
