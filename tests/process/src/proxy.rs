//! A small TCP fault proxy for loopback tests: put it between one replica and the database, then
//! add latency, blackhole the link, or reset every connection through it.
//!
//! - [`Mode::Latency`] delays every chunk, in both directions, by a fixed time.
//! - [`Mode::Blackhole`] stops forwarding: bytes already read are held and nothing more is read, so
//!   the peers' sends stall as on a partitioned network; TCP connections stay open, and when the
//!   mode goes back to [`Mode::Pass`] the held bytes flow (as retransmission would deliver them).
//! - [`Proxy::reset`] closes every open connection with an RST (zero linger); new connections are
//!   accepted as usual.
//! - [`Proxy::retarget`] sends new connections to another upstream (a promoted standby) and resets
//!   every open one, as a virtual IP moved to another server would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to the bytes it forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward as they come.
    Pass,
    /// Forward each chunk after this delay.
    Latency(Duration),
    /// Forward nothing until the mode changes.
    Blackhole,
}

#[derive(Debug, Clone, Copy)]
struct Control {
    mode: Mode,
    generation: u64,
    upstream: SocketAddr,
}

/// A running proxy. Stops accepting when dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    control: Arc<watch::Sender<Control>>,
    accepted: Arc<AtomicUsize>,
    resets: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`. Call from within
    /// a Tokio runtime (with the `net` driver).
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (control, _) = watch::channel(Control {
            mode: Mode::Pass,
            generation: 0,
            upstream,
        });
        let control = Arc::new(control);
        let accepted = Arc::new(AtomicUsize::new(0));
        let resets = Arc::new(AtomicUsize::new(0));
        let task = {
            let (control, accepted, resets) = (
                Arc::clone(&control),
                Arc::clone(&accepted),
                Arc::clone(&resets),
            );
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::Relaxed);
                    let rx = control.subscribe();
                    let resets = Arc::clone(&resets);
                    tokio::spawn(async move {
                        if serve(client, rx).await {
                            resets.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            })
        };
        Ok(Proxy {
            addr,
            control,
            accepted,
            resets,
            task,
        })
    }

    /// The address to connect to instead of the upstream.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sets what happens to bytes from now on.
    pub fn set(&self, mode: Mode) {
        self.control.send_modify(|c| c.mode = mode);
    }

    /// Closes every connection open now with an RST.
    pub fn reset(&self) {
        self.control.send_modify(|c| c.generation += 1);
    }

    /// Sends new connections to `upstream` from now on, and closes every connection open now with
    /// an RST (counted in [`Proxy::resets`]).
    pub fn retarget(&self, upstream: SocketAddr) {
        self.control.send_modify(|c| {
            c.upstream = upstream;
            c.generation += 1;
        });
    }

    /// Where new connections go.
    pub fn upstream(&self) -> SocketAddr {
        self.control.borrow().upstream
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Connections closed by [`Proxy::reset`] so far.
    pub fn resets(&self) -> usize {
        self.resets.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        // Open connections end with a reset too, rather than outliving the proxy.
        self.reset();
    }
}

/// Forwards one connection to the upstream of the moment until either side closes it or a reset
/// (or a retarget); answers whether it was reset.
async fn serve(mut client: TcpStream, control: watch::Receiver<Control>) -> bool {
    // Read together: a retarget while connecting resets this connection too.
    let Control {
        upstream,
        generation,
        ..
    } = *control.borrow();
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        let _ = client.set_zero_linger();
        return false;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let reset = {
        let (mut client_read, mut client_write) = client.split();
        let (mut server_read, mut server_write) = server.split();
        tokio::select! {
            r = pump(&mut client_read, &mut server_write, control.clone(), generation) => r,
            r = pump(&mut server_read, &mut client_write, control.clone(), generation) => r,
        }
    };
    if reset {
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
    reset
}

/// Copies one direction; answers `true` when stopped by a reset.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    mut control: watch::Receiver<Control>,
    generation: u64,
) -> bool
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            },
            () = reset_after(&mut control, generation) => return true,
        };
        // Hold the bytes while blackholed; delay them under latency.
        loop {
            let now = *control.borrow_and_update();
            if now.generation != generation {
                return true;
            }
            match now.mode {
                Mode::Pass => break,
                Mode::Latency(d) => {
                    tokio::time::sleep(d).await;
                    break;
                }
                Mode::Blackhole => {
                    if control.changed().await.is_err() {
                        return false;
                    }
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return false;
        }
    }
}

async fn reset_after(control: &mut watch::Receiver<Control>, generation: u64) {
    loop {
        if control.borrow_and_update().generation != generation {
            return;
        }
        if control.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that answers each connection with `tag` and keeps it open.
    async fn server(tag: u8) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = s.write_all(&[tag]).await;
                    let mut sink = [0u8; 64];
                    while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
                });
            }
        });
        addr
    }

    async fn first_byte(proxy: &Proxy) -> (TcpStream, u8) {
        let mut c = TcpStream::connect(proxy.addr()).await.expect("connect");
        let mut b = [0u8; 1];
        c.read_exact(&mut b).await.expect("first byte");
        (c, b[0])
    }

    #[tokio::test]
    async fn retarget_resets_open_connections_and_sends_new_ones_to_the_new_upstream() {
        let (a, b) = (server(b'a').await, server(b'b').await);
        let proxy = Proxy::start(a).await.expect("proxy");
        let (mut old, tag) = first_byte(&proxy).await;
        assert_eq!(tag, b'a');
        proxy.retarget(b);
        assert_eq!(proxy.upstream(), b);
        let mut rest = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), old.read(&mut rest)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "the old connection is closed: {read:?}"
        );
        let (_new, tag) = first_byte(&proxy).await;
        assert_eq!(tag, b'b');
        // Counted once the connection's task has ended, just after it closed the sockets.
        for _ in 0..100 {
            if proxy.resets() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(proxy.resets(), 1);
    }
}
