#pragma once
// The simulation behind `xpd view --live SCENE -o OUT`: a SceneSimulation of the scene (a surgery
// session, docs/scene-format.md §9b) run on a thread of its own into the run folder OUT through the
// library's run writer, so that the viewer shows its frames as they come. It first computes the
// scene's frames, then waits for surgical events posted by the viewer (POST /api/event, one event
// of the scene format without "frame"/"frames"; see viewer/README.md "Live mode"). Each event gets
// the next frame: it is applied before that frame is solved, and its remaining frames (a cut or a
// hook given "duration": n frames) are solved before the next event is taken. An event the mesh
// refuses (a cut that crosses no face, a point in no tet, a fragment left unattached) is discarded,
// the state unchanged, and its error is the reply.
//
// Every applied event is recorded in OUT/events.json ({"scene", "frames", "events"} with the
// events' absolute frames): `xpd run SCENE --events OUT/events.json` replays the session.
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "http_server.hpp"

namespace xpd {
class SceneSimulation;
class RunWriter;
struct FrameStats;
}  // namespace xpd

namespace xpd::cli {

struct LiveOptions {
  std::string scene;
  std::string out;
  /// Frames solved after each event beyond its own (a quasistatic frame already settles).
  int settle_frames = 0;
  /// Longest wait of a POST for its event's first frame before it is answered 202 (accepted).
  double reply_timeout_s = 120;
  bool quiet = false;
};

/// The events of a live session merged into its scene's JSON document: "surgery.events" gains
/// them, "solver.frames" becomes the largest of `frames` and the events' last frames when that is
/// more, and bone attachments that reach their pose at the last frame keep the scene's last frame
/// (so the replay's inputs equal the session's).
void merge_recorded_events(nlohmann::json& scene, const nlohmann::json& recorded);

class LiveSession {
 public:
  /// Loads the scene (adding an empty "surgery" key when it has none), builds the simulation and
  /// creates OUT with frame 0. Throws xpd::Error subclasses naming the cause.
  explicit LiveSession(const LiveOptions& options);
  ~LiveSession();
  LiveSession(const LiveSession&) = delete;
  LiveSession& operator=(const LiveSession&) = delete;

  const std::filesystem::path& run_folder() const { return run_; }
  /// Starts the simulation thread.
  void start();
  /// Ends the thread after the frame under way (an event's remaining frames are not solved; the
  /// replay of events.json solves them), answers waiting posts and writes the closing metadata.
  /// Called by the destructor too.
  void stop();
  /// POST /api/event: the reply (200 with the frame it was applied at, 400 malformed, 422 refused
  /// by the mesh, 409 after an earlier failure stopped the session, 503 while stopping).
  http::PostReply post(const std::string& path, const std::string& body);
  /// Blocks until every posted event has been applied with all its frames and the session waits
  /// for the next (or has failed).
  void wait_until_idle();
  /// The simulation (read it only while the session is idle or stopped).
  const SceneSimulation& simulation() const { return *sim_; }
  /// The body of /data/index.json: run_index_json plus "live": {frame, frames_scene, events,
  /// state ("running" | "waiting" | "failed" | "stopped"), error, pending}.
  std::string index_json() const;

 private:
  struct Pending {
    nlohmann::json event;
    bool done = false;
    http::PostReply reply;
  };
  void loop();
  void advance_and_write(int frame);
  void write(int frame, const FrameStats& stats);  // the frame's files, totals and frame_
  void apply(Pending& p);
  void record(const nlohmann::json& event);

  LiveOptions options_;
  std::filesystem::path run_;
  std::unique_ptr<SceneSimulation> sim_;
  std::unique_ptr<RunWriter> writer_;
  nlohmann::json recorded_ = nlohmann::json::array();
  int scene_frames_ = 0;
  double default_stiffness_ = 0;  // of hooks and sutures posted without one
  int iterations_ = 0, unconverged_ = 0;
  double wall_ms_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable cv_;  // new pending events, stop, or a reply ready
  std::deque<std::shared_ptr<Pending>> queue_;
  int frame_ = 0;  // last frame written
  std::string state_ = "running";
  std::string error_;
  bool stop_ = false;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace xpd::cli
