//! The native HTTP server of the rsgi and native workers (RSGI, ASGI and WSGI
//! apps): tokio + hyper 1 on the listeners the worker inherited. It knows
//! nothing of Python: every request becomes an `Exchange` handed to a
//! `Dispatch` (the bridge and the WSGI engine implement it), and the
//! answer comes back as a `Reply` through a oneshot channel. HTTP/1.1 and
//! HTTP/2, over TCP or unix sockets, in clear or over TLS (rustls).

#[macro_use]
mod write_through;
pub mod answered;
pub mod app_fields;
mod body;
mod config;
mod connection;
mod counters;
mod direct_http1;
pub(crate) mod direct_wire;
mod dispatch;
mod exchange;
mod exchange_head;
mod fin_watch;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod gate;
pub mod h3;
pub mod health;
mod hyper_builders;
mod hyper_head_rules;
mod incoming;
mod listener;
mod precheck_io;
mod proxy_read;
mod reply;
mod reply_batch;
mod request_body;
mod room;
mod runtime;
mod sched;
mod send_file;
mod send_pace;
mod service;
mod shared;
mod sniff;
mod tls;
mod upgrade_gate;
mod websocket;
mod write_stall;
mod ws_session;

pub use body::ResponseBody;
pub use config::{Http2Config, HttpMode, RuntimeMode, ServerConfig, WsConfig};
pub(crate) use direct_http1::answer_itself;
pub use dispatch::{BoxIo, Dispatch, Served};
pub use exchange::{ConnInfo, Exchange, ExchangeBody, TlsInfo, Tracker, SMALL_BODY};
pub use exchange_head::{ExchangeHead, FieldsOf, OwnedFields};
pub use fin_watch::client_fin;
pub use h3::QuicSocket;
pub use incoming::{Incoming, IncomingError};
pub use reply::{Reply, ReplyFields};
pub use reply_batch::ReplySlot;
pub use reply_batch::{batch_on_this_thread, flush as flush_replies, new_round, stop_batching};
pub use request_body::{BodyRead, BodyStream};
pub use runtime::Server;
pub use sched::make_way;
pub use send_file::SendFile;
pub use shared::Shared;
pub use tls::{load as load_tls, ClientAuth, TlsFiles};
pub use websocket::{WsAnswer, WsExchange};
pub use ws_session::{WsAccept, WsIn, WsInbox};
