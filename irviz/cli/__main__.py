from irviz.cli.main import main

raise SystemExit(main())
