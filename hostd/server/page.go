package server

import (
	"html/template"
	"net/http"

	"github.com/tessera-gpu/tessera/hostd/api"
)

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Tessera host</title>
<meta http-equiv="refresh" content="5">
<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}</style></head>
<body><h1>Tessera host</h1>
<p>GPUs: {{.Status.Source}}{{if .Status.Simulated}} (simulated){{end}} &middot; {{.Status.Running}} running &middot; {{.Status.Queued}} queued &middot; <a href="/metrics">metrics</a></p>
<h2>GPUs</h2><table><tr><th>GPU</th><th>model</th><th>free</th><th>jobs</th></tr>
{{range .Status.GPUs}}<tr><td>{{.Index}}</td><td>{{.Model}}</td><td>{{printf "%.3f" .FreeFraction}}</td><td>{{range .Jobs}}{{.}} {{end}}</td></tr>
{{end}}</table>
<h2>Jobs</h2><table><tr><th>job</th><th>state</th><th>queue</th><th>priority</th><th>command</th><th>reason</th></tr>
{{range .Jobs}}<tr><td>{{.ID}}</td><td>{{.State}}</td><td>{{.Queue}}</td><td>{{.Priority}}</td><td>{{range .Command}}{{.}} {{end}}</td><td>{{.Reason}}</td></tr>
{{end}}</table></body></html>
`))

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	st, err := s.d.Status()
	if err != nil {
		s.fail(w, err)
		return
	}
	jobs, err := s.d.Jobs()
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTmpl.Execute(w, struct {
		Status api.Status
		Jobs   []api.Job
	}{st, jobs}); err != nil {
		s.log.Warn("status page", "err", err)
	}
}
