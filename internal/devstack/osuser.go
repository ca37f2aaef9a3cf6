package devstack

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// runAs is the OS account a server process runs under: the current one, or, when
// we are root, the account the server's package created (Postgres refuses root).
type runAs struct {
	name     string
	uid, gid int
	home     string
	switched bool
}

func accountFor(serverUser string) (*runAs, error) {
	if os.Geteuid() != 0 || serverUser == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("look up the current user: %w", err)
		}
		return &runAs{name: u.Username, uid: os.Geteuid(), gid: os.Getegid(), home: u.HomeDir}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, the server must run as the %q OS user, which does not exist (is its Debian package installed?): %w", serverUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &runAs{name: u.Username, uid: uid, gid: gid, home: u.HomeDir, switched: true}, nil
}

// command builds a command that runs as the account.
func (a *runAs) command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	if a.switched {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}}
		cmd.Env = append(os.Environ(), "HOME="+a.home, "USER="+a.name, "LOGNAME="+a.name)
		cmd.Dir = "/"
	}
	return cmd
}

// own gives dir and everything under it to the account, and makes every ancestor
// of dir traversable, which a server running as another account needs to reach it.
func (a *runAs) own(dir string) error {
	if !a.switched {
		return nil
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, a.uid, a.gid)
	})
	if err != nil {
		return fmt.Errorf("give %s to the %s user: %w", dir, a.name, err)
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, st.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("%s must be traversable by the %s user: %w", p, a.name, err)
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
