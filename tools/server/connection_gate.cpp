#include "tools/server/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tern::server {

using Clock = std::chrono::steady_clock;

struct ConnectionGate::Connection {
  enum class State { Reading, Running, Lingering };
  int fd = -1;
  State state = State::Reading;
  std::string buffer;  // received, not yet consumed by a request
  RequestScanner scanner;
  Clock::time_point deadline;
  bool started = false;  // a byte of the current request has arrived
  bool head_seen = false;
  bool sent_continue = false;
  size_t served = 0;
  size_t counted_bytes = 0;  // this connection's share of buffered_
  bool dead = false;         // closed; deleted by whoever holds it
  std::string client;        // the remote address, counted in clients_ while counted_client
  bool counted_client = false;
  bool reserved = false;  // one of the health_reserve connections: GET /health only
  std::string refusal;    // why it is reserved: the 503 for anything but GET /health
};

namespace {

const char* reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

void send_best_effort(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a fresh socket's buffer holds a small response; otherwise the client is stuck
    done += static_cast<size_t>(n);
  }
}

std::string gate_response(int status, const std::string& body) {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
                  "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                  "\r\nConnection: close\r\n";
  if (status == 503) r += "Retry-After: 1\r\n";
  return r + "\r\n" + body;
}

bool light_method(const std::string& m) { return m == "GET" || m == "HEAD" || m == "OPTIONS"; }

bool health_check(const std::string& method, const std::string& path) {
  return (method == "GET" || method == "HEAD") && (path == "/health" || path.rfind("/health?", 0) == 0);
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

// One whole request, already in memory, for httplib to parse; writes go to the socket.
class GateStream : public httplib::Stream {
 public:
  GateStream(int fd, const std::string& buffer, size_t start, size_t end, std::chrono::milliseconds write_timeout)
      : fd_(fd), buffer_(buffer), end_(end), pos_(start), write_timeout_ms_(static_cast<int>(write_timeout.count())) {}

  // How far httplib read: it reads the head a byte at a time, so a request whose head it could
  // not parse (a method it does not know, say) leaves this short of the head's end.
  size_t position() const { return pos_; }

  bool is_readable() const override { return pos_ < end_; }
  bool is_writable() const override { return wait_writable(); }
  // Past the request's end reads see its end: httplib never reads into the next request.
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, end_ - pos_);
    std::memcpy(ptr, buffer_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  // All of it or -1 (httplib's header writes do not retry a partial write).
  ssize_t write(const char* ptr, size_t size) override {
    // httplib answers `Expect: 100-continue` itself, but the body is already here: the gate
    // sent the one 100 Continue the client needed (or none, when the body came unasked).
    static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!wrote_ && size == sizeof kContinue - 1 && std::memcmp(ptr, kContinue, size) == 0) {
      return static_cast<ssize_t>(size);
    }
    wrote_ = true;
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!wait_writable()) return -1;
      } else {
        return -1;
      }
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  bool wait_writable() const {
    pollfd p{fd_, POLLOUT, 0};
    int rc;
    do rc = ::poll(&p, 1, write_timeout_ms_);
    while (rc < 0 && errno == EINTR);
    return rc > 0 && (p.revents & POLLOUT) != 0 && (p.revents & (POLLERR | POLLHUP)) == 0;
  }

  int fd_;
  const std::string& buffer_;
  size_t end_, pos_;
  int write_timeout_ms_;
  bool wrote_ = false;
};

}  // namespace

ConnectionGate::ConnectionGate(const GateLimits& limits, GateHooks hooks) : limits_(limits), hooks_(std::move(hooks)) {
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) {
    wake_read_ = fds[0];
    wake_write_ = fds[1];
  }
  workers_ = std::make_unique<httplib::ThreadPool>(std::max<size_t>(1, limits_.workers));
  light_workers_ = std::make_unique<httplib::ThreadPool>(std::max<size_t>(1, limits_.light_workers));
  thread_ = std::thread([this] { loop(); });
}

ConnectionGate::~ConnectionGate() {
  stop();
  if (wake_read_ >= 0) ::close(wake_read_);
  if (wake_write_ >= 0) ::close(wake_write_);
}

ConnectionGate::Counts ConnectionGate::counts() const { return Counts{open_, running_, lingering_, buffered_}; }

void ConnectionGate::wake() {
  const char b = 1;
  (void)!::write(wake_write_, &b, 1);  // a full pipe already wakes the loop
}

void ConnectionGate::stop() {
  if (stopping_.exchange(true)) return;
  wake();
  if (thread_.joinable()) thread_.join();
  // Running requests finish (their connections close as they end), then nothing is left.
  workers_->shutdown();
  light_workers_->shutdown();
  std::vector<Connection*> left;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    left.swap(inbox_);
  }
  for (Connection* c : left) {
    finish(c);
    delete c;
  }
}

void ConnectionGate::add(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // server-sent events go out as written
  if (stopping_) {
    ::close(fd);
    return;
  }
  auto* c = new Connection;
  c->fd = fd;
  c->scanner = RequestScanner(limits_.request);
  c->deadline = Clock::now() + limits_.header_timeout;
  open_.fetch_add(1);
  std::string message;
  if (!admit(c, &message)) {
    send_best_effort(fd, gate_response(503, hooks_.error_body(503, message)));
    hooks_.log("", "", 503, message);
    linger(c);
    if (c->dead) {
      delete c;
      return;
    }
  }
  hand_back(c);
}

bool ConnectionGate::admit(Connection* c, std::string* refusal) {
  int port = 0;
  address_of(c->fd, true, c->client, port);
  std::lock_guard<std::mutex> lock(clients_mutex_);
  const auto it = clients_.find(c->client);
  const size_t mine = it == clients_.end() ? 0 : it->second;
  // Past the table's limit, one of the connections kept for GET /health (while there is one);
  // not past one address's: its own connections would take the reserve too.
  if (open_ > limits_.max_connections) {  // open_ counts c already
    *refusal = "the server has " + std::to_string(limits_.max_connections) + " connections open; try again shortly";
    if (reserved_ >= limits_.health_reserve) return false;
    ++reserved_;
    c->reserved = true;
    c->refusal = *refusal;
  } else if (limits_.max_connections_per_client > 0 && mine >= limits_.max_connections_per_client) {
    *refusal = "this address has " + std::to_string(mine) + " connections open, the most one client may have";
    return false;
  }
  ++clients_[c->client];
  c->counted_client = true;
  return true;
}

void ConnectionGate::release(Connection* c) {
  if (!c->counted_client) return;
  std::lock_guard<std::mutex> lock(clients_mutex_);
  c->counted_client = false;
  const auto it = clients_.find(c->client);
  if (it != clients_.end() && --it->second == 0) clients_.erase(it);
  if (c->reserved) --reserved_;
  c->reserved = false;
}

void ConnectionGate::hand_back(Connection* c) {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    if (!stopping_) {
      inbox_.push_back(c);
      c = nullptr;
    }
  }
  if (c != nullptr) {
    finish(c);
    delete c;
    return;
  }
  wake();
}

void ConnectionGate::take_inbox() {
  std::vector<Connection*> in;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    in.swap(inbox_);
  }
  for (Connection* c : in) {
    // A kept-alive connection may already hold its next (pipelined) request.
    if (c->state == Connection::State::Reading && !c->buffer.empty()) {
      c->deadline = Clock::now() + limits_.header_timeout;
      c->counted_bytes = c->buffer.size();
      buffered_ += c->counted_bytes;
      if (!advance(c)) continue;
    }
    owned_.push_back(c);
  }
}

void ConnectionGate::finish(Connection* c) {
  if (c->dead) return;
  if (c->state == Connection::State::Lingering) {
    --lingering_;
  } else {
    --open_;
    release(c);
  }
  buffered_ -= c->counted_bytes;
  c->counted_bytes = 0;
  ::close(c->fd);
  c->fd = -1;
  c->dead = true;
}

void ConnectionGate::linger(Connection* c) {
  buffered_ -= c->counted_bytes;
  c->counted_bytes = 0;
  std::string().swap(c->buffer);
  if (lingering_.fetch_add(1) >= limits_.max_lingering) {
    --lingering_;
    finish(c);  // counted as open still
    return;
  }
  --open_;
  release(c);
  ::shutdown(c->fd, SHUT_WR);
  c->state = Connection::State::Lingering;
  c->deadline = Clock::now() + std::chrono::seconds(2);
}

void ConnectionGate::refuse(Connection* c, int status, const std::string& message) {
  send_best_effort(c->fd, gate_response(status, hooks_.error_body(status, message)));
  hooks_.log(c->scanner.method(), c->scanner.path(), status, message);
  linger(c);
}

bool ConnectionGate::on_readable(Connection* c) {
  char chunk[65536];
  // Bounded per wake-up, so one fast sender cannot starve the others.
  for (int round = 0; round < 4; ++round) {
    const ssize_t n = ::recv(c->fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;  // closed or reset: nothing to answer
    if (c->state == Connection::State::Lingering) continue;
    if (buffered_ + static_cast<size_t>(n) > limits_.max_buffered_bytes) {
      refuse(c, 503, "the server is receiving too many large requests at once; try again shortly");
      return true;
    }
    c->buffer.append(chunk, static_cast<size_t>(n));
    c->counted_bytes += static_cast<size_t>(n);
    buffered_ += static_cast<size_t>(n);
    if (!c->started && c->served > 0) c->deadline = Clock::now() + limits_.header_timeout;
    // Dispatched: a worker has it now (and may already have closed it): hands off.
    if (!advance(c) || c->state != Connection::State::Reading) return true;
  }
  return true;
}

bool ConnectionGate::advance(Connection* c) {
  c->started = true;
  switch (c->scanner.scan(c->buffer.data(), c->buffer.size())) {
    case RequestScanner::Status::Bad: refuse(c, c->scanner.error_status(), c->scanner.error_message()); return true;
    case RequestScanner::Status::Complete:
      if (c->reserved && !health_check(c->scanner.method(), c->scanner.path())) {
        refuse(c, 503, c->refusal + " (only GET /health is answered past it)");
        return true;
      }
      dispatch(c);
      return false;
    case RequestScanner::Status::NeedMore:
      if (c->scanner.head_complete() && !c->head_seen) {
        c->head_seen = true;
        c->deadline = Clock::now() + limits_.body_timeout;
        if (c->scanner.expects_continue() && !c->sent_continue) {
          c->sent_continue = true;
          send_best_effort(c->fd, "HTTP/1.1 100 Continue\r\n\r\n");
        }
      }
      return true;
  }
  return true;
}

void ConnectionGate::dispatch(Connection* c) {
  c->state = Connection::State::Running;
  // From here the worker has it, until it comes back through the inbox.
  const auto it = std::find(owned_.begin(), owned_.end(), c);
  if (it != owned_.end()) owned_.erase(it);
  buffered_ -= c->counted_bytes;
  c->counted_bytes = 0;
  ++running_;
  auto& pool = light_method(c->scanner.method()) ? light_workers_ : workers_;
  pool->enqueue([this, c] { run(c); });
}

void ConnectionGate::run(Connection* c) {
  GateStream stream(c->fd, c->buffer, c->scanner.request_start(), c->scanner.request_bytes(), limits_.write_timeout);
  bool client_closes = false;
  const bool close_after = stopping_ || c->reserved || c->served + 1 >= limits_.max_requests_per_connection;
  // A request httplib could not parse (its own 400) closes the connection, as the gate's do.
  const bool ok = hooks_.serve(stream, close_after, client_closes) && stream.position() >= c->scanner.head_bytes();
  ++c->served;
  c->buffer.erase(0, c->scanner.request_bytes());
  if (c->buffer.capacity() > 65536 && c->buffer.size() < 4096) c->buffer.shrink_to_fit();
  c->scanner.reset();
  c->started = c->head_seen = c->sent_continue = false;
  c->state = Connection::State::Reading;
  c->deadline = Clock::now() + limits_.idle_timeout;
  --running_;
  if (!ok || client_closes || close_after) {
    linger(c);
    if (c->dead) {
      delete c;
      return;
    }
  }
  hand_back(c);
}

void ConnectionGate::sweep() {
  owned_.erase(std::remove_if(owned_.begin(), owned_.end(),
                              [](Connection* c) {
                                const bool dead = c->dead;
                                if (dead) delete c;
                                return dead;
                              }),
               owned_.end());
}

void ConnectionGate::loop() {
  std::vector<pollfd> fds;
  std::vector<Connection*> polled;
  while (!stopping_) {
    take_inbox();
    sweep();
    const auto now = Clock::now();
    auto next = now + std::chrono::seconds(1);
    fds.assign(1, pollfd{wake_read_, POLLIN, 0});
    polled.assign(owned_.begin(), owned_.end());
    for (Connection* c : polled) {
      fds.push_back(pollfd{c->fd, POLLIN, 0});
      next = std::min(next, c->deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
    const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait) + 1));
    if (rc < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) {
      char drain[256];
      while (::read(wake_read_, drain, sizeof drain) > 0) {
      }
    }
    // Each connection is touched at its own turn only: one dispatched there is a worker's.
    for (size_t i = 0; i < polled.size(); ++i) {
      if (fds[i + 1].revents != 0 && !on_readable(polled[i])) finish(polled[i]);
    }
    // A head or body that did not arrive in time is answered 408; an idle connection, or a
    // lingering one, is closed.
    const auto after = Clock::now();
    for (Connection* c : owned_) {
      if (c->dead || c->deadline > after) continue;
      if (c->state == Connection::State::Reading && c->started) {
        refuse(c, 408,
               c->head_seen ? "the request body did not arrive within " + std::to_string(limits_.body_timeout.count()) +
                                  " ms of its head"
                            : "the request line and headers did not arrive within " +
                                  std::to_string(limits_.header_timeout.count()) + " ms");
      } else {
        finish(c);
      }
    }
    sweep();
  }
  for (Connection* c : owned_) {
    finish(c);
    delete c;
  }
  owned_.clear();
}

namespace {

// httplib's accept loop hands each socket to a task queue; this one runs the hand-off (to the
// gate) at once on the accepting thread.
class Inline : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

GatedServer::GatedServer() {
  new_task_queue = [] { return new Inline; };
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  gate_->add(sock);
  return true;
}

void GatedServer::widen_backlog(int backlog) {
  const socket_t sock = svr_sock_;
  if (sock != INVALID_SOCKET) ::listen(sock, backlog);  // listening again only resizes the queue
}

}  // namespace tern::server
