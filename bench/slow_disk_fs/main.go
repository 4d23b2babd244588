// slowdiskfs mounts a directory through FUSE with a fixed delay before every
// read, standing in for a busy disk or a network mount in bench/slow_disk.
//
// usage: slowdiskfs [-delay 5ms] [-direct-io] [-fail-after BYTES] SOURCE MOUNTPOINT
//
// Pages read once stay in the page cache (keep_cache), as on a local disk;
// with -direct-io nothing is cached at all and every read waits. With
// -fail-after, reads at or past that offset of a file named *.eio fail with
// EIO (a dying disk) and those of a file named *.hang never answer (a dead
// network mount), for the server's error tests. It runs until SIGINT or
// SIGTERM, then unmounts.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
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
)

// slowNode is a loopback node whose opened files wait before each read.
type slowNode struct {
	fs.LoopbackNode
}

var _ = (fs.NodeOpener)((*slowNode)(nil))

func (n *slowNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
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

func (f *slowFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
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
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: slowdiskfs [-delay 5ms] [-direct-io] [-fail-after BYTES] SOURCE MOUNTPOINT")
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
	server, err := fs.Mount(mountpoint, rootNode, &fs.Options{
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
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		close(hung)
		server.Unmount()
	}()
	server.Wait()
}
