//! Plumbing shared by every kubedav target: telemetry ([`telemetry`]), the admin HTTP
//! server with `/metrics`, `/healthz` and `/readyz` ([`admin`]), client-side gRPC
//! balancing over headless Services ([`balance`]), gRPC serving with the
//! standard health and reflection services ([`grpc`]), listeners ([`listen`]), Redis
//! connections ([`redis`]) and shutdown signals ([`shutdown`]).

pub mod admin;
pub mod backoff;
pub mod balance;
pub mod grpc;
pub mod listen;
pub mod redis;
pub mod shutdown;
pub mod telemetry;
