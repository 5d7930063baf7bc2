package initd

import (
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Terminal size of a tty request that gives none.
const (
	defaultRows = 24
	defaultCols = 80
)

// openPTY opens a pseudo-terminal of the given size. The master comes back
// in non-blocking mode, so that reads on it accept a deadline and Close
// interrupts them (pty.Open leaves it blocking, which would let a
// background process holding the terminal open hang a session forever).
func openPTY(rows, cols uint16) (master, slave *os.File, err error) {
	m, slave, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	defer m.Close()
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		err = unix.SetNonblock(fd, true)
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		slave.Close()
		return nil, nil, fmt.Errorf("pty master: %w", err)
	}
	master = os.NewFile(uintptr(fd), m.Name())
	if rows == 0 || cols == 0 {
		rows, cols = defaultRows, defaultCols
	}
	if err := setSize(master, rows, cols); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// setSize sets the terminal size of a pty through its master.
func setSize(master *os.File, rows, cols uint16) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return fmt.Errorf("set pty size: %w", err)
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if err == nil {
		err = ierr
	}
	if err != nil {
		return fmt.Errorf("set pty size: %w", err)
	}
	return nil
}
