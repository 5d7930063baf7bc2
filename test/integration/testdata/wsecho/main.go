// Command wsecho is a WebSocket echo server the integration tests run
// inside a sandbox: every message it receives on / it sends back,
// prefixed with the host name, so a test can tell which sandbox answered.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/coder/websocket"
)

func main() {
	addr := flag.String("addr", ":8081", "address to listen on")
	flag.Parse()
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		for {
			typ, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, typ, append([]byte(host+": "), msg...)); err != nil {
				return
			}
		}
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
