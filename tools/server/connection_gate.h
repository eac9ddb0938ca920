// tern-server's accept-side layer over cpp-httplib. httplib gives each accepted connection a
// pool thread that then blocks in reads, with a timeout per read: a client that sends half a
// header, or a byte every few seconds, holds a thread, and a few hundred of them starve every
// request behind them (/health included). The gate instead owns every connection while its
// request arrives, in one poll() loop:
//  - a request is handed to a worker only once it is whole (head and body, in memory), so
//    workers never wait on a client's input; GET/HEAD/OPTIONS go to a pool of their own, so
//    /health answers while every generation worker is busy;
//  - the head must arrive within header_timeout (from the connection, or from the first byte
//    of a kept-alive connection's next request), the body within body_timeout of the head;
//    late ones get 408. Idle keep-alive connections close after idle_timeout;
//  - past max_connections a new connection gets an immediate 503, and so does one from an
//    address that already has max_connections_per_client open; past max_buffered_bytes (all
//    requests being received, together) so does the one that would exceed it;
//  - health_reserve connections beyond max_connections are kept for GET /health (anything else
//    on them is a 503 once its request has arrived), so a full table still answers a health
//    check (a client past its own cap gets no reserve: its connections would fill it);
//  - responses the gate sends itself end with a lingering close (read and drop what the client
//    still sends for up to 2 s), so the client reads the status instead of a reset.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tools/server/request_scanner.h"

namespace tern::server {

struct GateLimits {
  size_t max_connections = 512;
  size_t max_connections_per_client = 128;  // per remote address; 0: no cap of its own
  size_t health_reserve = 8;                // beyond max_connections, for GET /health only
  size_t max_lingering = 64;                // closing connections kept for a lingering close; beyond, closed at once
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};
  std::chrono::milliseconds idle_timeout{5000};
  std::chrono::milliseconds write_timeout{30000};  // a write that makes no progress this long drops the client
  RequestLimits request;
  size_t max_buffered_bytes = 32u << 20;
  size_t max_requests_per_connection = 1000;
  size_t workers = 8;        // POST and the rest: generation, tokenization
  size_t light_workers = 2;  // GET, HEAD, OPTIONS
};

struct GateHooks {
  // Runs one whole request read from `stream`; returns false when the connection must close
  // (httplib's process_request: `connection_closed` is set when the client asked to close).
  std::function<bool(httplib::Stream& stream, bool close_connection, bool& connection_closed)> serve;
  // The body of a response the gate sends itself (tern-server: an OpenAI error object).
  std::function<std::string(int status, const std::string& message)> error_body;
  // One line per response the gate sends itself; method and path are empty before a request line.
  std::function<void(const std::string& method, const std::string& path, int status, const std::string& message)> log;
};

class ConnectionGate {
 public:
  ConnectionGate(const GateLimits& limits, GateHooks hooks);
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // An accepted socket, from any thread; the gate owns it from here.
  void add(int fd);
  // Closes what is waiting for input, lets running requests finish, joins every thread.
  void stop();

  struct Counts {
    size_t open = 0;       // connections counted against max_connections
    size_t running = 0;    // requests on a worker
    size_t lingering = 0;  // closing
    size_t buffered_bytes = 0;
  };
  Counts counts() const;

  struct Connection;

 private:
  void loop();
  void take_inbox();
  void sweep();                     // deletes the loop's closed connections
  bool on_readable(Connection* c);  // false: the client closed or reset
  bool advance(Connection* c);      // after new bytes: dispatch (false), refuse or wait
  void dispatch(Connection* c);
  void run(Connection* c);  // on a worker
  void refuse(Connection* c, int status, const std::string& message);
  void linger(Connection* c);
  void finish(Connection* c);  // closes; the holder deletes
  void hand_back(Connection* c);
  bool admit(Connection* c, std::string* refusal);  // counts c against the limits, or says why not
  void release(Connection* c);                      // uncounts what admit() counted
  void wake();

  GateLimits limits_;
  GateHooks hooks_;
  int wake_read_ = -1, wake_write_ = -1;
  std::unique_ptr<httplib::ThreadPool> workers_, light_workers_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> open_{0}, running_{0}, lingering_{0}, buffered_{0};
  std::mutex clients_mutex_;
  std::map<std::string, size_t> clients_;  // open connections per remote address
  size_t reserved_ = 0;                    // health_reserve connections in use (clients_mutex_)
  std::mutex inbox_mutex_;
  std::vector<Connection*> inbox_;
  std::vector<Connection*> owned_;  // the loop's own (reading or lingering)
};

// httplib's Server with its accepted sockets handed to a ConnectionGate and requests run by
// its own process_request (routing, handlers, responses stay httplib's).
class GatedServer : public httplib::Server {
 public:
  GatedServer();
  void attach(ConnectionGate* gate) { gate_ = gate; }
  bool serve(httplib::Stream& stream, bool close_connection, bool& connection_closed) {
    return process_request(stream, close_connection, connection_closed, nullptr);
  }
  // httplib listens with a backlog of 5: a burst of connections would see dropped SYNs (a
  // 1 s retransmit). Call after bind.
  void widen_backlog(int backlog);

 private:
  bool process_and_close_socket(socket_t sock) override;
  ConnectionGate* gate_ = nullptr;
};

}  // namespace tern::server
