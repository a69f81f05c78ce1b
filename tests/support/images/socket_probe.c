/* socket-probe FAMILY TYPE: opens socket(FAMILY, TYPE, 0) and says whether
 * it could. The kernel asks its modprobe helper for the module of a family
 * it does not have yet (net-pf-FAMILY), so a test can see which families a
 * container can make the guest load. Exit 0 when the socket opened. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: socket-probe FAMILY TYPE\n");
    return 2;
  }
  const int family = atoi(argv[1]);
  const int type = atoi(argv[2]);
  const int fd = socket(family, type, 0);
  if (fd < 0) {
    printf("socket(%d, %d): %s\n", family, type, strerror(errno));
    return 1;
  }
  printf("socket(%d, %d): opened\n", family, type);
  close(fd);
  return 0;
}
