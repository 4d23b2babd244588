// slowdiskfs mounts a directory through FUSE with a fixed delay before every
// read, standing in for a busy disk or a network mount in bench/slow_disk.
//
// usage: slowdiskfs [-delay 5ms] [-direct-io] [-fail-after BYTES]
//
//	[-cache-timeout 0s] [-stats FILE] SOURCE MOUNTPOINT
//
// Pages read once stay in the page cache (keep_cache), as on a local disk;
// with -direct-io nothing is cached at all and every read waits. With
// -fail-after, reads at or past that offset of a file named *.eio fail with
// EIO (a dying disk) and those of a file named *.hang never answer (a dead
// network mount), for the server's error tests. -cache-timeout is how long
// the kernel may trust names and attributes without asking (an NFS mount's
// attribute cache); by default it asks every time.
//
// SIGUSR2 stalls the whole mount, as a network file server that stopped
// answering: every lookup, attribute, open, statfs, listing and read waits
// until the next SIGUSR2. SIGUSR1 writes the read counters to the -stats file
// (reads, bytes, summed read time, most reads at once since the last write),
// from which a benchmark tells how many reads a server keeps in flight. It
// runs until SIGINT or SIGTERM, then unmounts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

var (
	delay     time.Duration
	directIO  bool
	failAfter int64
	// hung is closed at unmount: reads of *.hang files wait on it.
	hung = make(chan struct{})
	// stall, while not nil, holds every operation until it is closed.
	stallMu sync.Mutex
	stall   chan struct{}
	// Read counters for -stats.
	reads, readBytes, readNanos, inFlight, mostInFlight atomic.Int64
)

// waitIfStalled holds the calling operation while the mount is stalled.
func waitIfStalled() {
	stallMu.Lock()
	gate := stall
	stallMu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-hung:
		}
	}
}

// toggleStall stalls the mount, or lets it go on.
func toggleStall() {
	stallMu.Lock()
	defer stallMu.Unlock()
	if stall == nil {
		stall = make(chan struct{})
	} else {
		close(stall)
		stall = nil
	}
}

// readStats is what SIGUSR1 writes to the -stats file.
type readStats struct {
	Seq          int64 `json:"seq"`
	Reads        int64 `json:"reads"`
	Bytes        int64 `json:"bytes"`
	ReadNanos    int64 `json:"read_nanos"`
	MostInFlight int64 `json:"most_in_flight"`
}

func writeStats(path string, seq int64) {
	st := readStats{Seq: seq, Reads: reads.Load(), Bytes: readBytes.Load(),
		ReadNanos: readNanos.Load(), MostInFlight: mostInFlight.Swap(inFlight.Load())}
	data, _ := json.Marshal(st)
	tmp := path + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		os.Rename(tmp, path)
	}
}

// slowNode is a loopback node whose opened files wait before each read.
type slowNode struct {
	fs.LoopbackNode
}

var (
	_ = (fs.NodeOpener)((*slowNode)(nil))
	_ = (fs.NodeLookuper)((*slowNode)(nil))
	_ = (fs.NodeGetattrer)((*slowNode)(nil))
	_ = (fs.NodeStatfser)((*slowNode)(nil))
	_ = (fs.NodeOpendirHandler)((*slowNode)(nil))
)

func (n *slowNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	waitIfStalled()
	return n.LoopbackNode.Lookup(ctx, name, out)
}

func (n *slowNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	waitIfStalled()
	return n.LoopbackNode.Getattr(ctx, f, out)
}

func (n *slowNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	waitIfStalled()
	return n.LoopbackNode.Statfs(ctx, out)
}

func (n *slowNode) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	waitIfStalled()
	return n.LoopbackNode.OpendirHandle(ctx, flags)
}

func (n *slowNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	waitIfStalled()
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	if directIO {
		fuseFlags |= fuse.FOPEN_DIRECT_IO
	} else {
		// Pages read once stay cached across opens, as on a local disk or an
		// unchanged NFS file; servers that reopen files are not penalised.
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	}
	name := n.Path(n.Root())
	return &slowFile{FileHandle: fh, eio: strings.HasSuffix(name, ".eio"),
		hang: strings.HasSuffix(name, ".hang")}, fuseFlags, 0
}

// slowFile delays every read by the configured amount, then reads through.
type slowFile struct {
	fs.FileHandle
	eio, hang bool
}

var _ = (fs.FileReader)((*slowFile)(nil))

var _ = (fs.FileGetattrer)((*slowFile)(nil))

func (f *slowFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	waitIfStalled()
	return f.FileHandle.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *slowFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	now := inFlight.Add(1)
	for {
		most := mostInFlight.Load()
		if now <= most || mostInFlight.CompareAndSwap(most, now) {
			break
		}
	}
	start := time.Now()
	defer func() {
		inFlight.Add(-1)
		reads.Add(1)
		readBytes.Add(int64(len(dest)))
		readNanos.Add(int64(time.Since(start)))
	}()
	waitIfStalled()
	time.Sleep(delay)
	if failAfter >= 0 && off+int64(len(dest)) > failAfter {
		if f.eio {
			return nil, syscall.EIO
		}
		if f.hang {
			<-hung
			return nil, syscall.EIO
		}
	}
	return f.FileHandle.(fs.FileReader).Read(ctx, dest, off)
}

func main() {
	flag.DurationVar(&delay, "delay", 5*time.Millisecond, "wait before every read")
	flag.BoolVar(&directIO, "direct-io", false, "bypass the page cache: every read reaches the delay")
	flag.Int64Var(&failAfter, "fail-after", -1, "reads of *.eio files past this offset fail, of *.hang files never answer")
	cacheTimeout := flag.Duration("cache-timeout", 0, "how long the kernel trusts names and attributes without asking")
	statsPath := flag.String("stats", "", "file SIGUSR1 writes the read counters to")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: slowdiskfs [-delay 5ms] [-direct-io] [-fail-after BYTES] [-cache-timeout 0s] [-stats FILE] SOURCE MOUNTPOINT")
		os.Exit(2)
	}
	source, mountpoint := flag.Arg(0), flag.Arg(1)
	root := &fs.LoopbackRoot{Path: source}
	root.NewNode = func(rootData *fs.LoopbackRoot, parent *fs.Inode, name string, st *syscall.Stat_t) fs.InodeEmbedder {
		return &slowNode{LoopbackNode: fs.LoopbackNode{RootData: rootData}}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(source, &st); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root.Dev = uint64(st.Dev)
	rootNode := root.NewNode(root, nil, "", &st)
	root.RootNode = rootNode
	// Signals are taken before "mounted" is printed: a caller may signal at once.
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2)
	server, err := fs.Mount(mountpoint, rootNode, &fs.Options{
		EntryTimeout: cacheTimeout,
		AttrTimeout:  cacheTimeout,
		MountOptions: fuse.MountOptions{
			FsName:      "slowdisk",
			Name:        "slowdisk",
			DirectMount: true,
			AllowOther:  true,
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mount:", err)
		os.Exit(1)
	}
	fmt.Println("mounted")
	go func() {
		var seq int64
		for s := range sig {
			switch s {
			case syscall.SIGUSR1:
				seq++
				if *statsPath != "" {
					writeStats(*statsPath, seq)
				}
			case syscall.SIGUSR2:
				toggleStall()
			default:
				close(hung)
				server.Unmount()
				return
			}
		}
	}()
	server.Wait()
}
