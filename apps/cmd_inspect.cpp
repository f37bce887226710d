// `mpigan inspect MODEL|FILE.h5`: a model's layers, output shapes and parameter counts; or a
// calorimeter data file's validation and summary.
#include "commands.hpp"

#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/models/gan_model.hpp"

#include <cstdio>

namespace mpigan::apps {
namespace {

int inspect_model(const std::string& name) {
  // The reference backend only allocates here; nothing is computed.
  auto backend = make_backend("reference");
  auto m = models::make_gan({.name = name}, *backend, 1);
  std::printf("model %s: image %s, generator input %lld (%s)\n\n", name.c_str(), m->image.to_string().c_str(),
              static_cast<long long>(m->latent), m->angle_model ? "E/100, theta, 254 noise" : "(E/100) * z");
  std::printf("generator:\n%s\n", m->generator.summary().c_str());
  std::printf("discriminator:\n%s\n", m->discriminator.summary().c_str());
  std::printf("loss weights: bce %g, energy %g, ecal %g, angle %g\n", m->loss_weights.bce, m->loss_weights.energy,
              m->loss_weights.ecal, m->loss_weights.angle);
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto what = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("inspect", "Show a model (3dgan-25, anglegan-51, tiny-8) or check a data file (*.h5)");
  cmd->add_option("what", *what, "model name or HDF5 data file")->required();
  cmd->callback([what] {
    const bool file = what->ends_with(".h5") || what->ends_with(".hdf5") || what->find('/') != std::string::npos;
    if (file) {
      if (const int rc = inspect_data_file(*what); rc != 0) throw CLI::RuntimeError(rc);
      return;
    }
    inspect_model(*what);
  });
}

}  // namespace mpigan::apps
