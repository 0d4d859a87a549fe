package testcluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// RestartAPIServer stops kube-apiserver and starts it again (StopAPIServer,
// then StartAPIServer): clients keep their URL and credentials, and their
// watches break.
func (c *Cluster) RestartAPIServer(ctx context.Context, kill bool) error {
	if err := c.StopAPIServer(kill); err != nil {
		return err
	}
	return c.StartAPIServer(ctx)
}

// apiServerGrace is how long a SIGTERM'd kube-apiserver may drain before it
// is killed (a drain can wait on long-running requests for a minute).
const apiServerGrace = 5 * time.Second

// StopAPIServer stops kube-apiserver. With kill it is killed (SIGKILL:
// requests in flight are cut, some after etcd applied them); otherwise it
// shuts down gracefully (SIGTERM), and is killed if it has not finished
// after apiServerGrace. etcd keeps running.
func (c *Cluster) StopAPIServer(kill bool) error {
	c.mu.Lock()
	old := c.apiserver
	c.mu.Unlock()
	if old == nil {
		return fmt.Errorf("stop kube-apiserver: it is not running")
	}
	if kill {
		old.kill()
	} else {
		old.stop(apiServerGrace)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, with the
// same etcd, port, certificates and tokens, and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	old := c.apiserver
	c.mu.Unlock()
	if gone, _ := old.exited(); !gone {
		return fmt.Errorf("start kube-apiserver: it is already running")
	}
	wctx, cancel := context.WithTimeout(ctx, c.readyTimeout)
	defer cancel()
	if err := c.launchAPIServer(wctx); err != nil {
		return fmt.Errorf("start kube-apiserver again: %w", err)
	}
	return nil
}

// CompactEtcd writes a key of its own (outside the API server's prefix)
// and compacts etcd's history up to the revision after it, which it
// returns: a watch that resumes from any resource version seen before then fails
// with 410 Gone and its client must list again. The API server's watch
// cache may still serve such a watch; compacting while the API server is
// stopped (between StopAPIServer and StartAPIServer) expires every watch
// its clients resume.
func (c *Cluster) CompactEtcd(ctx context.Context) (int64, error) {
	// Two writes first put the compaction past every revision a client
	// has seen (a client's last revision may be etcd's current one, and a
	// watch resumes at the revision after it).
	for i := 0; i < 2; i++ {
		bump := map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/tessera-testcluster/compaction")),
			"value": base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(i)))}
		if err := c.etcdCall(ctx, "/v3/kv/put", bump, nil); err != nil {
			return 0, fmt.Errorf("write to etcd before compacting: %w", err)
		}
	}
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	key := base64.StdEncoding.EncodeToString([]byte("/"))
	if err := c.etcdCall(ctx, "/v3/kv/range", map[string]any{"key": key, "limit": 1}, &rng); err != nil {
		return 0, fmt.Errorf("read etcd's revision: %w", err)
	}
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read etcd's revision: header.revision %q: %w", rng.Header.Revision, err)
	}
	if err := c.etcdCall(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

// etcdCall posts body to etcd's JSON gateway and decodes the answer into out.
func (c *Cluster) etcdCall(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.etcdURL+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, msg)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(msg, out)
}

// KubeconfigFor writes a kubeconfig of one of Options.Users and returns its path.
func (c *Cluster) KubeconfigFor(user string) (string, error) {
	tok, ok := c.users[user]
	if !ok {
		return "", fmt.Errorf("kubeconfig of user %q: not one of Options.Users", user)
	}
	path := filepath.Join(c.Dir, "kubeconfig-"+user)
	if err := os.WriteFile(path, []byte(c.kubeconfigOf(user, tok)), 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig of user %s: %w", user, err)
	}
	return path, nil
}

// AuditLog is the API server's audit log (JSON lines, one audit.k8s.io/v1
// Event each), or "" without Options.AuditPolicy. Restarts append to it.
func (c *Cluster) AuditLog() string { return c.auditLog }

// Process is a program a test started next to the control plane (a
// scheduler replica, a node agent), in its own process group, logging to
// <Dir>/<name>.log. Cluster.Stop stops those still running.
type Process struct{ p *process }

// StartProcess starts bin with args and the environment of the test plus
// env ("KEY=value"). Starting a name again appends to the same log.
func (c *Cluster) StartProcess(name, bin string, env []string, args ...string) (*Process, error) {
	p, err := startProcessEnv(name, bin, c.Dir, env, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.extra = append(c.extra, p)
	c.mu.Unlock()
	return &Process{p: p}, nil
}

// Pid is the process's id (also its process group's).
func (p *Process) Pid() int { return p.p.cmd.Process.Pid }

// Signal sends sig to the process's group (SIGSTOP freezes it, SIGCONT
// resumes it).
func (p *Process) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid(), sig); err != nil {
		return fmt.Errorf("signal %v to %s (pid %d): %w", sig, p.p.name, p.Pid(), err)
	}
	return nil
}

// Kill kills the process group (SIGKILL: no clean-up runs) and waits for
// the process to end.
func (p *Process) Kill() { p.p.kill() }

// Stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) { p.p.stop(grace) }

// Exited reports whether the process has ended and how, without waiting.
func (p *Process) Exited() (bool, error) { return p.p.exited() }

// LogTail returns the last lines of the process's log.
func (p *Process) LogTail(lines int) string { return p.p.logTail(lines) }
