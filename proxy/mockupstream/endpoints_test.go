package mockupstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestEchoReturnsTheRequestAsReceived(t *testing.T) {
	t.Parallel()
	s := startMock(t, nil, Options{})
	cases := []struct {
		name     string
		method   string
		path     string
		body     []byte
		header   http.Header
		wantText bool
	}{
		{name: "JSON with unknown fields and odd key order", method: http.MethodPost, path: "/echo/v1/embeddings?api-version=2024-01&x=%20y",
			body: []byte(`{"z":1,  "input":"你好","a":{"b":[1,2]}}`), header: http.Header{"X-Custom": {"one", "two"}, "Authorization": {"Bearer sk-test"}}, wantText: true},
		{name: "binary body", method: http.MethodPut, path: "/echo/upload", body: []byte{0xff, 0x00, 0xfe, 'a'}},
		{name: "no body", method: http.MethodDelete, path: "/echo", wantText: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequestWithContext(context.Background(), c.method, "http://"+s.Addr()+c.path, bytes.NewReader(c.body))
			for k, vs := range c.header {
				req.Header[k] = vs
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var e Echo
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("echo is not JSON: %s", raw)
			}
			path, query, _ := strings.Cut(c.path, "?")
			if e.Method != c.method || e.Path != path || e.Query != query {
				t.Errorf("echo says %s %s ? %s", e.Method, e.Path, e.Query)
			}
			got, _ := base64.StdEncoding.DecodeString(e.BodyBase64)
			if !bytes.Equal(got, c.body) || (c.wantText && e.Body != string(c.body)) || (!c.wantText && e.Body != "") {
				t.Errorf("echo body %q / %q, want %q", e.Body, got, c.body)
			}
			for k, vs := range c.header {
				if strings.Join(e.Header[k], "|") != strings.Join(vs, "|") {
					t.Errorf("header %s echoed as %q, want %q", k, e.Header[k], vs)
				}
			}
		})
	}
}

func TestModelsEndpoint(t *testing.T) {
	t.Parallel()
	s := startMock(t, nil, Options{})
	resp, err := http.Get(s.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != DefaultModel || list.Data[0].Object != "model" {
		t.Errorf("models %+v, want the default model", list)
	}
}

func TestErrorsUseTheOpenAIEnvelope(t *testing.T) {
	t.Parallel()
	s := startMock(t, nil, Options{})
	cases := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		code   string
		param  string
	}{
		{name: "malformed JSON", method: http.MethodPost, path: "/v1/chat/completions", body: `{"model":"m",`, status: 400, code: "invalid_json"},
		{name: "not an object", method: http.MethodPost, path: "/v1/chat/completions", body: `[1]`, status: 400, code: "invalid_json"},
		// gjson's recursive check overflowed the stack on this body and killed the process.
		{name: "16 MiB of [", method: http.MethodPost, path: "/v1/chat/completions", body: strings.Repeat("[", 16<<20), status: 400, code: "invalid_json"},
		{name: "nested deeper than 128 levels", method: http.MethodPost, path: "/v1/chat/completions", body: `{"model":"m","messages":[{"role":"user","content":"x","x":` + strings.Repeat("[", 126) + strings.Repeat("]", 126) + `}]}`, status: 400, code: "invalid_json"},
		{name: "missing model", method: http.MethodPost, path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"x"}]}`, status: 400, code: "missing_model", param: "model"},
		{name: "messages not an array", method: http.MethodPost, path: "/v1/chat/completions", body: `{"model":"m","messages":"x"}`, status: 400, code: "missing_messages", param: "messages"},
		{name: "empty messages", method: http.MethodPost, path: "/v1/chat/completions", body: `{"model":"m","messages":[]}`, status: 400, code: "empty_messages", param: "messages"},
		{name: "n out of range", method: http.MethodPost, path: "/v1/chat/completions", body: `{"model":"m","n":0,"messages":[{"role":"user","content":"x"}]}`, status: 400, code: "invalid_value", param: "n"},
		{name: "n not an integer", method: http.MethodPost, path: "/v1/chat/completions", body: `{"model":"m","n":1.5,"messages":[{"role":"user","content":"x"}]}`, status: 400, code: "invalid_value", param: "n"},
		{name: "GET chat completions", method: http.MethodGet, path: "/v1/chat/completions", status: 405, code: "method_not_allowed"},
		{name: "unknown path", method: http.MethodPost, path: "/v1/embeddings", body: `{}`, status: 404, code: "not_found"},
		{name: "unknown model", method: http.MethodGet, path: "/v1/models/gpt-9", status: 404, code: "model_not_found", param: "model"},
	}
	// The group returns once its parallel cases are done, so the recording is complete.
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				req, _ := http.NewRequestWithContext(context.Background(), c.method, "http://"+s.Addr()+c.path, strings.NewReader(c.body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				var env envelope
				if err := json.Unmarshal(raw, &env); err != nil || env.Error.Message == "" || env.Error.Type == "" {
					t.Fatalf("not an error envelope: %s", raw)
				}
				if resp.StatusCode != c.status || env.Error.Code == nil || *env.Error.Code != c.code {
					t.Errorf("got %d %s, want %d code %s", resp.StatusCode, raw, c.status, c.code)
				}
				if (c.param == "") != (env.Error.Param == nil) || (env.Error.Param != nil && *env.Error.Param != c.param) {
					t.Errorf("param in %s, want %q", raw, c.param)
				}
			})
		}
	})
	recs, err := s.WaitFor(len(cases), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Path == "/v1/embeddings" && string(r.Body) != "{}" {
			t.Errorf("the 404 request's body was not recorded: %q", r.Body)
		}
	}
}
