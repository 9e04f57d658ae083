// Command apiserver runs etcd (embedded, in-process) and a kube-apiserver in front of it: a real
// API server for dry-run installs of the chart, with no controllers (nothing ever rolls out).
//
// usage: apiserver DATA_DIR ETCD_CLIENT_PORT ETCD_PEER_PORT -- kube-apiserver flags...
package main

import (
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	if len(os.Args) < 5 || os.Args[4] != "--" {
		fmt.Fprintln(os.Stderr, "usage: apiserver DATA_DIR ETCD_CLIENT_PORT ETCD_PEER_PORT -- kube-apiserver flags...")
		os.Exit(2)
	}
	cfg := embed.NewConfig()
	cfg.Dir = os.Args[1]
	client, _ := url.Parse("http://127.0.0.1:" + os.Args[2])
	peer, _ := url.Parse("http://127.0.0.1:" + os.Args[3])
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogLevel = "error"
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd did not become ready")
		os.Exit(1)
	}
	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(os.Args[5:])
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
