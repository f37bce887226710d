// `mpigan export`: a trained generator as an ONNX model for ONNX Runtime (deploy/onnx_export.hpp,
// docs/deployment.md).
//
//   mpigan export RUN_DIR|CHECKPOINT|NAME --onnx G.onnx [--raw] [--vectors V.json [--vector-events N] [--seed S]]
#include "commands.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/deploy/onnx_export.hpp"

#include <cstdio>
#include <memory>

namespace mpigan::apps {

namespace {

struct ExportArgs {
  std::string source, onnx, vectors;
  bool raw = false;
  std::int64_t vector_events = 4;
  std::uint64_t seed = 1;
  std::string backend = "cpu";
};

void run_export(const ExportArgs& a) {
  init_logging("warn");
  MPIGAN_CHECK(!a.onnx.empty() || !a.vectors.empty(), "export: give --onnx FILE.onnx (and/or --vectors FILE.json)");
  // The test vectors' place checked before the model is written (export_onnx checks the model's).
  if (!a.vectors.empty()) check_output_file(a.vectors, "export");
  const train::TrainedModel m = train::locate_trained(a.source);
  deploy::OnnxExportOptions o;
  o.physical = !a.raw;
  o.backend = a.backend;
  if (!a.onnx.empty()) {
    const auto r = deploy::export_onnx(m, a.onnx, o);
    std::printf(
        "exported the generator of %s (model %s, experiment '%s')\n  -> %s: %lld operators, %lld parameters, "
        "%.1f kB, ONNX opset %d, checked by ONNX's checker\n",
        m.checkpoint.c_str(), m.experiment.model.name.c_str(), m.experiment.name.c_str(), a.onnx.c_str(),
        static_cast<long long>(r.nodes), static_cast<long long>(r.parameters), static_cast<double>(r.bytes) / 1e3,
        r.opset);
    for (const auto& i : r.inputs) std::printf("  input  %s\n", i.c_str());
    for (const auto& i : r.outputs) std::printf("  output %s\n", i.c_str());
  }
  if (!a.vectors.empty()) {
    deploy::write_vectors(m, a.vectors, a.vector_events, a.seed, o);
    std::printf(
        "test vectors: %lld showers' inputs and mpigan's output -> %s "
        "(node tests/onnx/check_onnx.mjs MODEL.onnx %s compares ONNX Runtime's)\n",
        static_cast<long long>(a.vector_events), a.vectors.c_str(), a.vectors.c_str());
  }
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export",
                                 "Export a trained generator as an ONNX model (ONNX Runtime, simulation "
                                 "frameworks; docs/deployment.md)");
  cmd->add_option("source", a->source,
                  "run directory (its latest checkpoint), checkpoint file, or the name of a shipped generator")
      ->required();
  cmd->add_option("--onnx", a->onnx, "the ONNX file to write");
  cmd->add_flag("--raw", a->raw,
                "output the generator's raw image (preprocessed units) instead of cell energies in GeV");
  cmd->add_option("--vectors", a->vectors,
                  "also write test vectors: inputs and mpigan's own output for them (JSON), for checking the export "
                  "in ONNX Runtime (tests/onnx/check_onnx.mjs)");
  cmd->add_option("--vector-events", a->vector_events, "showers in the test vectors")
      ->check(integer_check(1, 100000))
      ->capture_default_str();
  cmd->add_option("--vectors-backend", a->backend, "the engine computing the test vectors' outputs: cpu or reference")
      ->check(CLI::IsMember({"cpu", "reference"}))
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the test vectors' conditions and latent noise")
      ->check(seed_check())
      ->capture_default_str();
  cmd->callback([a] { run_export(*a); });
}

}  // namespace mpigan::apps
