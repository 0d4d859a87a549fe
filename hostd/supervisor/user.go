package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// User is whom a job runs as when it is not the supervisor's own user: a
// supervisor running as root starts the job with this uid, primary gid
// and supplementary groups (it opens the job's log files first, so the
// user needs no access to the state folder).
type User struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	// Name is the user's name, "" when the uid has no entry in the user
	// database.
	Name string `json:"name,omitempty"`
	// Home is the user's home folder: the job's HOME when its environment
	// sets none ("/" when the user database names none).
	Home string `json:"home,omitempty"`
}

// String names the user as messages do: "alice (uid 1000)", or "uid 1234".
func (u User) String() string {
	if u.Name == "" {
		return fmt.Sprintf("uid %d", u.UID)
	}
	return fmt.Sprintf("%s (uid %d)", u.Name, u.UID)
}

// LookupUID returns the user with this uid from the user database. A uid
// without an entry (a container's numeric user, say) is still a user:
// it gets the group of the same number, no supplementary group and home
// "/", as no database says more about it.
func LookupUID(uid uint32) (User, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	var unknown user.UnknownUserIdError
	if errors.As(err, &unknown) {
		return User{UID: uid, GID: uid, Home: "/"}, nil
	}
	if err != nil {
		return User{}, fmt.Errorf("look up uid %d: %w", uid, err)
	}
	return fromDatabase(u)
}

// LookupUser returns the user named s (a user name, or a uid, which must
// then be in the user database).
func LookupUser(s string) (User, error) {
	u, err := user.Lookup(s)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		if _, perr := strconv.ParseUint(s, 10, 32); perr == nil {
			u, err = user.LookupId(s)
		}
	}
	if err != nil {
		return User{}, fmt.Errorf("no user %q in the user database (give a user name or uid from /etc/passwd): %w", s, err)
	}
	return fromDatabase(u)
}

func fromDatabase(u *user.User) (User, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return User{}, fmt.Errorf("user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return User{}, fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	out := User{UID: uint32(uid), GID: uint32(gid), Name: u.Username, Home: u.HomeDir}
	if out.Home == "" {
		out.Home = "/"
	}
	ids, err := u.GroupIds()
	if err != nil {
		return User{}, fmt.Errorf("user %s: supplementary groups: %w", u.Username, err)
	}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return User{}, fmt.Errorf("user %s: group id %q: %w", u.Username, id, err)
		}
		if !slices.Contains(out.Groups, uint32(g)) {
			out.Groups = append(out.Groups, uint32(g))
		}
	}
	return out, nil
}

// credential is u as the kernel takes it at exec.
func (u User) credential() *syscall.Credential {
	groups := u.Groups
	if groups == nil {
		groups = []uint32{} // set no supplementary group rather than keep root's
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: groups}
}

// userEnv adds HOME, USER and LOGNAME for u to env where it sets none.
func userEnv(env []string, u User) []string {
	set := func(name, value string) {
		for _, kv := range env {
			if strings.HasPrefix(kv, name+"=") {
				return
			}
		}
		env = append(env, name+"="+value)
	}
	set("HOME", u.Home)
	if u.Name != "" {
		set("USER", u.Name)
		set("LOGNAME", u.Name)
	}
	return env
}

// whyNotStarted says why a job's start failed where the kernel's answer
// names the program alone (fork/exec PROGRAM: ...) though the working
// folder was at fault: it is missing, or u may not enter it. "" when the
// folder is not the cause.
func whyNotStarted(dir string, u *User) string {
	if dir == "" {
		return ""
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("the job's working folder %s does not exist", dir)
	case err != nil:
		return fmt.Sprintf("the job's working folder %s: %v", dir, err)
	case !fi.IsDir():
		return fmt.Sprintf("the job's working folder %s is not a folder", dir)
	case u == nil:
		return ""
	}
	for p := dir; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && !u.mayEnter(fi) {
			return fmt.Sprintf("the job's working folder %s is not accessible to %s, whom the job runs as: %s (mode %04o, owner uid %d, group %d) does not let them in; make it searchable (x) for them, or run the job from another folder",
				dir, u, p, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, fi.Sys().(*syscall.Stat_t).Gid)
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

// mayEnter reports whether u may search the folder fi by its mode bits
// (access control lists aside: this only explains a failure the kernel
// already reported).
func (u User) mayEnter(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || u.UID == 0 {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == u.UID:
		return perm&0o100 != 0
	case st.Gid == u.GID || slices.Contains(u.Groups, st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}
