package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
)

// uiFS holds the pages: plain HTML, CSS and JavaScript modules, served as they
// are written (no build step, so nothing can go stale).
//
//go:embed ui
var uiFS embed.FS

type uiFile struct {
	body        []byte
	contentType string
	etag        string
}

// uiFiles are the embedded files by their path under /factgate/ui/.
var uiFiles = func() map[string]uiFile {
	out := map[string]uiFile{}
	_ = fs.WalkDir(uiFS, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := uiFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) {
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".html":
			ct = "text/html; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		out[strings.TrimPrefix(p, "ui/")] = uiFile{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return out
}()

// contentSecurityPolicy allows the pages only their own files and API: no inline
// script, no third-party origin, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// serveUI serves the embedded pages; every path that is not a file gets the
// single page (its script reads the location hash).
func serveUI(rc *fasthttp.RequestCtx) {
	if !rc.IsGet() && !rc.IsHead() {
		methodNotAllowed(rc, "GET")
		return
	}
	p := string(rc.Path())
	if p == strings.TrimSuffix(UIPath, "/") {
		rc.Redirect(UIPath, fasthttp.StatusMovedPermanently)
		return
	}
	name := strings.TrimPrefix(p, UIPath)
	f, ok := uiFiles[name]
	if name == "" || (!ok && !strings.Contains(path.Base(name), ".")) {
		f, ok = uiFiles["index.html"]
	}
	if !ok {
		writeError(rc, interceptors.Errorf(404, "invalid_request_error", "not_found", "no console file %s", name))
		return
	}
	h := &rc.Response.Header
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	// Revalidate every time: an upgraded binary's pages are picked up at once.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	if string(rc.Request.Header.Peek("If-None-Match")) == f.etag {
		rc.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	rc.SetStatusCode(200)
	rc.SetContentType(f.contentType)
	rc.SetBody(f.body)
}
