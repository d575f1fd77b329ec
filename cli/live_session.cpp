// The live surgery session of `xpd view --live` (live_session.hpp).
#include "live_session.hpp"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "run_folder.hpp"

namespace xpd::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Messages may quote what a client sent (a parse error quotes the bytes it stopped at): invalid
// UTF-8 is replaced rather than thrown from dump().
http::PostReply reply(int status, json body) {
  return {status, body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", "application/json"};
}
http::PostReply error_reply(int status, const std::string& message) { return reply(status, json{{"error", message}}); }

}  // namespace

void merge_recorded_events(json& scene, const json& recorded) {
  if (!recorded.is_object() || !recorded.contains("events") || !recorded["events"].is_array())
    throw Error("recorded events: expected an object with an \"events\" array (OUT/events.json of xpd view --live)");
  if (!scene.is_object()) return;  // parse_scene reports it
  json& solver = scene["solver"];
  if (!solver.is_object()) solver = json::object();
  const int scene_frames = solver.contains("frames") && solver["frames"].is_number_integer()
                               ? solver["frames"].get<int>()
                               : SolverSettings{}.frames;
  int frames = recorded.contains("frames") && recorded["frames"].is_number_integer() ? recorded["frames"].get<int>()
                                                                                     : scene_frames;
  // An event recorded before all its frames were solved (the session stopped in between) still
  // gets them all in the replay.
  for (const json& e : recorded["events"]) {
    if (!e.is_object()) continue;
    if (e.contains("frames") && e["frames"].is_array() && e["frames"].size() == 2 && e["frames"][1].is_number_integer())
      frames = std::max(frames, e["frames"][1].get<int>());
    for (const char* key : {"frame", "release_frame"})
      if (e.contains(key) && e[key].is_number_integer()) frames = std::max(frames, e[key].get<int>());
  }
  if (frames > scene_frames) {
    solver["frames"] = frames;
    // Bone poses are reached at pose_frame, by default the last frame: keep the scene's.
    if (scene.contains("attachments") && scene["attachments"].is_array())
      for (json& a : scene["attachments"])
        if (a.is_object() && a.contains("type") && a["type"] == "bone" && !a.contains("pose_frame"))
          a["pose_frame"] = scene_frames;
  }
  json& surgery = scene["surgery"];
  if (!surgery.is_object()) surgery = json::object();
  json& events = surgery["events"];
  if (!events.is_array()) events = json::array();
  for (const json& e : recorded["events"]) events.push_back(e);
}

LiveSession::LiveSession(const LiveOptions& options) : options_(options) {
  if (options_.out.empty()) throw Error("xpd view --live needs an output folder (-o OUT) for the session's frames");
  Scene scene = load_scene(options_.scene, [](json& doc) {
    if (doc.is_object() && !doc.contains("surgery")) doc["surgery"] = json{{"events", json::array()}};
  });
  // The viewer follows every frame.
  scene.outputs.every = 1;
  scene.outputs.vtu = true;
  sim_ = std::make_unique<SceneSimulation>(std::move(scene));
  scene_frames_ = sim_->num_frames();
  // Hooks and sutures drawn without a stiffness: 10 μ h̄, ten times the stiffness of a cube of
  // tissue one mean edge h̄ wide (k ≈ μ h̄), so that they pull the tissue close to their target.
  double mu = 0;
  for (const Material& m : sim_->scene().materials) mu = std::max(mu, m.mu);
  default_stiffness_ = 10 * mu * mean_edge_length(sim_->mesh().nodes, sim_->mesh().tets);
  writer_ = std::make_unique<RunWriter>(*sim_, options_.out, scene_frames_);
  run_ = fs::canonical(options_.out);
  record(json());  // an events.json without events from the start
}

LiveSession::~LiveSession() { stop(); }

void LiveSession::start() {
  thread_ = std::thread([this] { loop(); });
}

void LiveSession::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  if (finished_ || !writer_) return;
  finished_ = true;
  RunSummary sum;
  sum.frames = frame_;
  sum.iterations = iterations_;
  sum.unconverged_frames = unconverged_;
  sum.wall_ms = wall_ms_;
  try {
    writer_->set_frames_computed(frame_);
    writer_->finish(sum);
  } catch (const std::exception& e) {
    std::cerr << "xpd view --live: could not write the closing metadata: " << e.what() << std::endl;
  }
  if (state_ != "failed") state_ = "stopped";
  cv_.notify_all();
}

void LiveSession::advance_and_write(int frame) { write(frame, sim_->advance(frame)); }

void LiveSession::write(int frame, const FrameStats& st) {
  writer_->write_frame(frame, st);
  iterations_ += st.iterations;
  unconverged_ += st.converged ? 0 : 1;
  wall_ms_ += st.wall_ms;
  std::lock_guard lock(mutex_);
  frame_ = frame;
  if (!options_.quiet)
    std::cout << fmt::format("xpd view --live: frame {} ({} iterations, {} nodes, {} tets)", frame, st.iterations,
                             sim_->mesh().nodes.rows(), sim_->mesh().tets.rows())
              << std::endl;
}

void LiveSession::loop() {
  std::shared_ptr<Pending> current;
  try {
    bool stopping = false;
    for (int f = 1; f <= scene_frames_ && !stopping; ++f) {
      {
        std::lock_guard lock(mutex_);
        stopping = stop_;
      }
      if (!stopping) advance_and_write(f);
    }
    while (!stopping) {
      {
        std::unique_lock lock(mutex_);
        state_ = "waiting";
        cv_.notify_all();
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_) break;
        current = queue_.front();
        queue_.pop_front();
        state_ = "running";
      }
      apply(*current);
      current.reset();
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    state_ = "failed";
    error_ = e.what();
    std::cerr << "xpd view --live: the session stopped: " << e.what() << std::endl;
  }
  std::lock_guard lock(mutex_);
  if (current && !current->done) {  // the event under way when the session failed
    current->reply = error_reply(409, "the session stopped: " + error_);
    current->done = true;
  }
  for (const auto& p : queue_) {
    p->reply = error_reply(state_ == "failed" ? 409 : 503,
                           state_ == "failed" ? "the session stopped: " + error_ : "the session is stopping");
    p->done = true;
  }
  queue_.clear();
  cv_.notify_all();
}

void LiveSession::apply(Pending& p) {
  auto answer = [&](http::PostReply r) {
    {
      std::lock_guard lock(mutex_);
      p.reply = std::move(r);
      p.done = true;
    }
    cv_.notify_all();
  };
  const json& body = p.event;
  if (!body.is_object()) return answer(error_reply(400, "the event must be a JSON object (viewer/README.md)"));
  // (the parser names a missing or unknown tool)
  const std::string tool = body.contains("tool") && body["tool"].is_string() ? body["tool"].get<std::string>() : "";
  for (const char* key : {"frame", "frames", "release_frame"})
    if (body.contains(key))
      return answer(error_reply(
          400,
          fmt::format("a live event takes the next frame: leave out '{}' (give \"duration\": n for a cut or a hook "
                      "that takes n frames)",
                      key)));
  int duration = 1;
  if (body.contains("duration")) {
    const json& d = body["duration"];
    if (tool != "cut" && tool != "hook") return answer(error_reply(400, "'duration' belongs to a cut or a hook"));
    if (!d.is_number_integer() || d.get<long long>() < 1 || d.get<long long>() > 10000)
      return answer(error_reply(400, "'duration' must be an integer number of frames in [1, 10000]"));
    duration = d.get<int>();
  }
  const int first = sim_->frames_done() + 1, last = first + duration - 1;
  json ev = body;
  ev.erase("duration");
  if ((tool == "hook" || tool == "suture") && !ev.contains("stiffness")) ev["stiffness"] = default_stiffness_;
  if (duration == 1)
    ev["frame"] = first;
  else
    ev["frames"] = json::array({first, last});
  int index = 0;
  try {
    index = sim_->add_surgery_event(parse_surgery_event(ev, sim_->scene(), last, "/event"));
  } catch (const Error& err) {  // malformed, or not for this scene (a split without embedded surface)
    return answer(error_reply(400, err.what()));
  }
  FrameStats st;
  try {
    st = sim_->advance(first);
  } catch (const std::exception& err) {
    // Events are transactional: refused, the mesh, the factor and the positions are as before
    // it. A failure after the event was applied (the frame's solve) cannot be undone: the session
    // stops (loop() answers this post).
    try {
      sim_->discard_last_surgery_event();
    } catch (const Error&) {
      throw Error(fmt::format("frame {} failed after its event was applied: {}", first, err.what()));
    }
    return answer(error_reply(422, err.what()));
  }
  write(first, st);
  const SceneSimulation::SurgeryFrame& sf = sim_->surgery_frame();
  record(ev);
  answer(reply(200, json{{"frame", first},
                         {"last_frame", last + options_.settle_frames},
                         {"event", index},
                         {"faces_cut", sf.faces_cut},
                         {"tets_split", sf.tets_split},
                         {"tets_excised", sf.tets_excised},
                         {"hooks_placed", sf.hooks_placed},
                         {"sutures_placed", sf.sutures_placed},
                         {"factor_update_ms", sf.factor_update_ms},
                         {"nodes", sim_->mesh().nodes.rows()},
                         {"tets", sim_->mesh().tets.rows()},
                         {"iterations", st.iterations}}));
  if (!options_.quiet)
    std::cout << fmt::format("xpd view --live: event {} ({}) applied at frame {}", index, tool, first) << std::endl;
  // The event's other frames; a stop ends them early (events.json has the whole event, so a
  // replay runs it to its end: merge_recorded_events).
  for (int f = first + 1; f <= last + options_.settle_frames; ++f) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) break;
    }
    advance_and_write(f);
  }
  record(json());  // the frame count
}

void LiveSession::record(const json& event) {
  json doc;
  {
    std::lock_guard lock(mutex_);
    if (!event.is_null()) recorded_.push_back(event);
    doc = {{"scene", fs::absolute(options_.scene).lexically_normal().string()},
           {"frames", std::max(frame_, scene_frames_)},
           {"events", recorded_}};
  }
  io::write_file_atomic((fs::path(options_.out) / "events.json").string(),
                        [&](std::ostream& os) { os << doc.dump(2) << "\n"; });
}

http::PostReply LiveSession::post(const std::string& path, const std::string& body) {
  if (path != "/api/event") return error_reply(404, "POST " + path + ": the live viewer takes /api/event only");
  json event;
  try {
    event = json::parse(body);
  } catch (const json::parse_error& e) {
    return error_reply(400, std::string("the body is not valid JSON: ") + e.what());
  }
  auto p = std::make_shared<Pending>();
  p->event = std::move(event);
  std::unique_lock lock(mutex_);
  if (state_ == "failed") return error_reply(409, "the session stopped: " + error_);
  if (stop_) return error_reply(503, "the session is stopping");
  queue_.push_back(p);
  cv_.notify_all();
  const bool done =
      cv_.wait_for(lock, std::chrono::duration<double>(options_.reply_timeout_s), [&] { return p->done; });
  if (!done) return reply(202, json{{"queued", true}, {"pending", queue_.size()}});
  return p->reply;
}

void LiveSession::wait_until_idle() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return queue_.empty() && state_ != "running"; });
}

std::string LiveSession::index_json() const {
  json idx = json::parse(run_index_json(run_));
  std::lock_guard lock(mutex_);
  // Only the frames written with their statistics (the VTU comes first; a frame being written
  // must not reach the viewer before its stats.json entry).
  json frames = json::array();
  for (const json& f : idx["frames"])
    if (f.value("frame", 0) <= frame_) frames.push_back(f);
  idx["frames"] = std::move(frames);
  idx["live"] = json{{"frame", frame_},
                     {"frames_scene", scene_frames_},
                     {"events", recorded_.size()},
                     {"state", state_},
                     {"error", error_},
                     {"pending", queue_.size()},
                     {"default_stiffness", default_stiffness_}};
  return idx.dump();
}

}  // namespace xpd::cli
