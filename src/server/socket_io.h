// Blocking socket reads and writes with deadlines, for the HTTP connection threads.
//
// Every wait is a poll() in short slices so that a connection thread notices within
// kSocketPollSlice that the server is closing it (`abort` set), and no single slow peer can hold
// a thread past its deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string_view>

namespace specdec::server {

using SteadyClock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kSocketPollSlice{100};

enum class IoResult { Ok, Closed, TimedOut, Aborted };

// Reads what is available (at most `capacity` bytes) once some is, or until `deadline`.
IoResult read_some(int fd, char* buffer, size_t capacity, size_t& got,
                   SteadyClock::time_point deadline, const std::atomic<bool>& abort);

// Writes all of `data`; each stall (no progress) may last at most `stall_timeout`.
IoResult write_all(int fd, std::string_view data, std::chrono::milliseconds stall_timeout,
                   const std::atomic<bool>& abort);

// True once the peer closed or reset the connection; never consumes input.
bool peer_hung_up(int fd);

}  // namespace specdec::server
