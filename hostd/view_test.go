package hostd

import (
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/hostd/api"
)

func TestView(t *testing.T) {
	job := api.Job{ID: "job-1", Command: []string{"/opt/bin/train", "--token", "s3cret"}, Dir: "/home/alice/secret-project",
		Env: []string{"AWS_SECRET_ACCESS_KEY=x", "CUDA_VISIBLE_DEVICES=GPU-1"}}
	for _, tc := range []struct {
		name            string
		manage, withEnv bool
		env, command    []string
		dir             string
		envFiltered     bool
		filtered        bool
	}{
		{name: "owner asking for the environment", manage: true, withEnv: true, env: job.Env, command: job.Command, dir: job.Dir},
		{name: "owner", manage: true, command: job.Command, dir: job.Dir, envFiltered: true},
		{name: "another user", command: []string{"train"}, envFiltered: true, filtered: true},
		{name: "another user asking for the environment", withEnv: true, command: []string{"train"}, envFiltered: true, filtered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := View(job, tc.manage, tc.withEnv)
			if !slices.Equal(got.Env, tc.env) || !slices.Equal(got.Command, tc.command) || got.Dir != tc.dir ||
				got.EnvFiltered != tc.envFiltered || got.Filtered != tc.filtered {
				t.Errorf("View = env %q command %q dir %q envFiltered %v filtered %v\nwant env %q command %q dir %q envFiltered %v filtered %v",
					got.Env, got.Command, got.Dir, got.EnvFiltered, got.Filtered, tc.env, tc.command, tc.dir, tc.envFiltered, tc.filtered)
			}
		})
	}
	if len(job.Env) != 2 || job.Command[2] != "s3cret" {
		t.Errorf("View changed its input: %+v", job)
	}
	if got := View(api.Job{Command: []string{"/bin/true"}}, true, false); got.EnvFiltered {
		t.Error("a job without an environment is marked filtered")
	}
}
